"""What the Hardware tab shows, from fixture machines and plans."""

import html

from app.ui.hardware_view import device_choices, inventory_markdown, memory_bar_html, plan_html
from backends import registry
from backends.plan import Preferences
from backends.selection import select_backend
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


def test_the_cpus_instruction_sets_are_under_details_not_in_the_machines_lines() -> None:
    machine = make_inventory(flags=frozenset({"avx2", "fma"}))
    shown = inventory_markdown(machine)
    head, details = shown.split("<details>", 1)
    assert "ISA" not in head and "avx2" not in head and "- CPU: " in head
    assert "<summary>Details</summary>" in details and "- Instruction sets of the CPU: avx2 fma" in details
    assert "llama.cpp:" not in head  # the library's build: under Details too


def test_a_split_plan_draws_one_bar_per_device_and_lists_its_reasons() -> None:
    pair = make_inventory(ram_available_gib=60, gpus=(("RTX 3090", 24, 23.4), ("RTX 3060 <b>", 12, 11.6)))
    plan = select_backend(pair, MIXTRAL, Preferences(), registry.AUTOMATIC, registry.ALL)
    page = plan_html(plan, "")
    assert page.count('class="memory-bar"') == 3  # two GPUs and the CPU
    assert "RTX 3060 &lt;b&gt;" in page and "<b>RTX" not in page  # names are text, never markup
    assert "no single GPU holds the model" in page
    why, details = page.split('<details id="plan-details">', 1)
    assert f'<p id="plan-why">{html.escape(plan.reasons[0])}</p>' in why  # the choice in a line; the rest below
    assert len(plan.reasons) > 3 and all(html.escape(reason) in details for reason in plan.reasons[1:])
    bar = memory_bar_html(plan.placements[0])
    assert 'data-device="cuda:0"' in bar and "layers" in bar
    assert "that was available when the plan was made" in bar  # one word for free memory, and which moment
    assert plan_html(None, "Loading…") == "<p>Loading…</p>"


def test_backends_that_cannot_run_here_are_labelled_with_the_reason() -> None:
    from app.ui.hardware_view import backend_choices

    cpu_only = make_inventory(openvino=(("CPU", "AMD EPYC"),))
    choices = dict((value, label) for label, value in backend_choices(cpu_only))
    assert choices["cuda"] == "llama.cpp on NVIDIA GPUs (CUDA) — not available here: no NVIDIA GPU found"
    assert choices["openvino"] == "OpenVINO (Intel NPU, GPU or CPU)"
    assert choices["auto"] == "Automatic (best for this machine)"
    no_openvino = dict((value, label) for label, value in backend_choices(make_inventory()))
    assert no_openvino["openvino"].endswith("not available here: OpenVINO GenAI is not installed")
    assert choices["pipeline"].endswith("not available here: no worker is paired (pair one under Workers)")
    paired = dict((value, label) for label, value in backend_choices(cpu_only, paired_workers=2))
    assert paired["pipeline"] == "Split across the paired workers (llama.cpp RPC)"


def test_the_ram_line_says_when_it_was_read_and_a_step_shows_its_seconds() -> None:
    from app.ui.hardware_view import switch_progress_text

    page = inventory_markdown(make_inventory(ram_available_gib=5.5, ram_total_gib=8), as_of="14:02:11")
    assert "- RAM: 5.5 GiB available of 8.0 GiB (as of 14:02:11)" in page
    assert "as of" not in inventory_markdown(make_inventory())
    assert switch_progress_text("Compiling m.gguf for the CPU", 12) == "Compiling m.gguf for the CPU… 12 s"
    assert switch_progress_text("Loading on OpenVINO (CPU)…", 0) == "Loading on OpenVINO (CPU)… 0 s"


def test_free_memory_is_read_again_and_nothing_else_changes() -> None:
    import dataclasses

    from backends.hardware import with_current_memory

    stale = make_inventory(ram_available_gib=0.001, ram_total_gib=1)
    fresh = with_current_memory(stale)
    assert fresh.ram_available_bytes != stale.ram_available_bytes and fresh.ram_total_bytes > 0
    assert dataclasses.replace(fresh, ram_available_bytes=0, ram_total_bytes=0) == dataclasses.replace(
        stale, ram_available_bytes=0, ram_total_bytes=0
    )
