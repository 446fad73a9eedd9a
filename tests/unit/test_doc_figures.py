"""Every measured figure in the README and the docs names, in its paragraph, the file under bench/data/ that holds
it (tests/unit/doc_figures.py says what counts as a figure and what is a limit or a setting instead); and the rules
that find them, on small cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.doc_figures import paragraphs, unbacked

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    path.relative_to(ROOT).as_posix()
    for path in [ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")]
)


@pytest.mark.parametrize("page", PAGES)
def test_every_figure_names_the_file_that_holds_it(page: str) -> None:
    missing = unbacked((ROOT / page).read_text(encoding="utf-8"))
    assert not missing, "\n".join(
        f"{page}:{m.line}: {m.figure!r} names no file under bench/data/ in its paragraph: …{m.context}…"
        for m in missing
    )


def test_a_figure_without_its_file_is_found_and_one_with_it_is_not() -> None:
    found = unbacked("Answers came at 12.1 tok/s on this machine.\n\nThey came at 12.1 tok/s (`bench/data/a.json`).\n")
    assert [(m.line, m.figure) for m in found] == [(1, "12.1 tok/s")]


def test_every_unit_is_a_figure() -> None:
    text = "0.93x, 2.5×, 23 ms, 1.6-1.9 s, 60%, 50.0 tok/s, 516 MiB, 1.0 GiB, 100 Mbit/s and 12 minutes."
    assert [m.figure for m in unbacked(text)] == [
        "0.93x",
        "2.5×",
        "23 ms",
        "1.6-1.9 s",
        "60%",
        "50.0 tok/s",
        "516 MiB",
        "1.0 GiB",
        "100 Mbit/s",
        "12 minutes",
    ]


def test_limits_settings_code_and_sizes_on_screen_are_not_figures() -> None:
    text = (
        "At most two files of at most 2 MB; after 10 minutes; under a 256 MB cap and a 120 s deadline.\n"
        "The call times out (`HEARTH_MCP__CALL_TIMEOUT_S`, 60 s), files over 1 GB of memory (`READ_MB`) stop.\n"
        "Run `hearth bench --max 5s` and look at the 1280 x 900 picture.\n\n"
        "```\nreal 3.2 s\n```\n"
    )
    assert unbacked(text) == []


def test_a_table_takes_its_file_from_its_caption_or_the_line_under_it() -> None:
    captioned = "Measured (`bench/data/t.json`):\n\n| run | time |\n| --- | --- |\n| cold | 2.38 s |\n"
    under = "| run | time |\n| --- | --- |\n| cold | 2.38 s |\n\nFiles: `bench/data/t.json`; 0.25 s again.\n"
    bare = "Measured:\n\n| run | time |\n| --- | --- |\n| cold | 2.38 s |\n\nWhich is 0.25 s again.\n"
    assert unbacked(captioned) == [] and unbacked(under) == []
    assert [(m.line, m.figure) for m in unbacked(bare)] == [(5, "2.38 s"), (7, "0.25 s")]


def test_paragraphs_split_at_blank_lines_and_list_items_and_keep_line_numbers() -> None:
    text = "One line\nand its second.\n\n- an item\n- another\n  continued\n\nText\n| a |\n| - |\n"
    assert paragraphs(text) == [
        (1, "One line\nand its second."),
        (4, "- an item"),
        (5, "- another\n  continued"),
        (8, "Text\n| a |\n| - |"),
    ]
