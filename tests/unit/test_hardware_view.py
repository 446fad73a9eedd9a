"""What the Hardware tab shows, from fixture machines and plans."""

from app.ui.hardware_view import device_choices, inventory_markdown, memory_bar_html, plan_html
from backends import registry
from backends.selection import Preferences, select_backend
from tests.helpers import make_inventory
from tests.unit.test_selection_fixtures import MIXTRAL


def test_devices_offered_are_the_ones_this_machine_has() -> None:
    machine = make_inventory(
        gpus=(("NVIDIA GeForce RTX 4090", 24, 23),),
        openvino=(("CPU", "Intel Core Ultra 7"), ("GPU", "Intel Arc Graphics"), ("NPU", "Intel AI Boost")),
    )
    assert device_choices(machine) == [
        ("Automatic", "auto"),
        ("CPU", "cpu"),
        ("NVIDIA GeForce RTX 4090 (cuda:0)", "cuda:0"),
        ("Intel Arc Graphics (OpenVINO GPU)", "GPU"),
        ("Intel AI Boost (OpenVINO NPU)", "NPU"),
    ]
    assert device_choices(make_inventory()) == [("Automatic", "auto"), ("CPU", "cpu")]
    assert "GPU 0: NVIDIA GeForce RTX 4090" in inventory_markdown(machine)


def test_a_split_plan_draws_one_bar_per_device_and_lists_its_reasons() -> None:
    pair = make_inventory(ram_available_gib=60, gpus=(("RTX 3090", 24, 23.4), ("RTX 3060 <b>", 12, 11.6)))
    plan = select_backend(pair, MIXTRAL, Preferences(), registry.AUTOMATIC, registry.ALL)
    page = plan_html(plan, "")
    assert page.count('class="memory-bar"') == 3  # two GPUs and the CPU
    assert "RTX 3060 &lt;b&gt;" in page and "<b>RTX" not in page  # names are text, never markup
    assert "no single GPU holds the model" in page
    bar = memory_bar_html(plan.placements[0])
    assert 'data-device="cuda:0"' in bar and "layers" in bar
    assert plan_html(None, "Loading…") == "<p>Loading…</p>"
