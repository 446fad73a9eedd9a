"""The Models tab's hub section as words and rows (pure), which install a name asks for, and the downloads an earlier
install left unfinished (read from the files it keeps)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.services.catalog.hub_installs import Unfinished, partial_file, unfinished_downloads
from app.services.catalog.installs import install_job
from app.ui import hub_view
from models.catalog import CatalogError
from models.hub import HubListing, HubNameInvalid
from models.hub_catalog import HUB_CATALOG

GB = 1 << 30


def test_curated_rows_carry_their_key_and_licence_and_search_rows_their_reference() -> None:
    curated = hub_view.curated_rows(HUB_CATALOG.values())
    assert [row.choice for row in curated] == list(HUB_CATALOG)
    assert all(row.license for row in curated)
    found = hub_view.search_rows([HubListing("a/B-GGUF", (("b-Q4_0.gguf", 10), ("sub/b-Q8_0.gguf", 20)))])
    assert [row.choice for row in found] == ["hf:a/B-GGUF/b-Q4_0.gguf", "hf:a/B-GGUF/sub/b-Q8_0.gguf"]
    assert found[1].file_name == "b-Q8_0.gguf"


def test_the_table_says_type_fit_and_whether_installed_and_sends_search_rows_to_the_hub_page() -> None:
    rows = [
        hub_view.HubRow("small", "Small", "small-Q4_K_M.gguf", 2 * GB, "apache-2.0"),
        hub_view.HubRow("hf:x/Y-GGUF/big-F16.gguf", "x/Y-GGUF", "big-F16.gguf", 20 * GB),
    ]
    table = hub_view.hub_table(rows, {"small-Q4_K_M.gguf": "abc123"}, 8 * GB)
    assert table[0][2:] == ["2.0 GiB", "Q4_K_M", "apache-2.0", table[0][5], "yes"]
    assert table[0][5].startswith("yes: needs about 2.6 GiB")
    assert table[1][3:] == ["F16", "see its page on the hub", table[1][5], "no"]
    assert table[1][5].startswith("no: needs about 26.0 GiB")
    assert hub_view.hub_choices(rows[:1]) == [("Small — small-Q4_K_M.gguf, 2.0 GiB", "small")]


def test_the_line_about_unfinished_downloads_names_the_newest_and_counts_the_rest() -> None:
    assert hub_view.unfinished_line([]) == ""
    one = Unfinished("hf:a/B-GGUF/b-Q4_K_M.gguf", GB, 4 * GB)
    said = hub_view.unfinished_line([one])
    assert said == (
        "The download of b-Q4_K_M.gguf stopped at 1.0 GiB of 4.0 GiB (25%): press Install to go on from there."
    )
    assert hub_view.unfinished_line([one, one, one]).endswith(" 2 more unfinished downloads kept.")


def test_a_name_picks_its_install_or_is_refused_with_every_kind_of_name() -> None:
    assert not install_job("qwen2.5-coder-1.5b").from_hub
    curated = install_job("qwen3-4b-2507")
    assert curated.from_hub and curated.title == "Qwen3-4B-Instruct-2507"
    named = install_job("hf:makers/Tiny-GGUF/tiny-Q4_K_M.gguf")
    assert named.from_hub and named.title == "tiny-Q4_K_M.gguf"
    assert install_job("hf:makers/Tiny-GGUF").title == "makers/Tiny-GGUF"
    with pytest.raises(HubNameInvalid):
        install_job("hf:makers/Tiny-GGUF/notes.txt")
    with pytest.raises(CatalogError) as refused:
        install_job("gpt-5")
    assert "qwen2.5-coder-1.5b" in refused.value.remedy and "qwen3-4b-2507" in refused.value.remedy
    assert "hf:OWNER/REPO/FILE.gguf" in refused.value.remedy


def test_unfinished_downloads_are_read_newest_first_and_a_note_without_its_bytes_is_forgotten(tmp_path: Path) -> None:
    def leave(sha: str, reference: str, have: int, when: int) -> Path:
        partial = partial_file(tmp_path, sha)
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(b"x" * have)
        os.utime(partial, (when, when))
        partial.with_suffix(".json").write_text(json.dumps({"reference": reference, "size": 100}))
        return partial

    leave("a" * 64, "hf:o/R-GGUF/old.gguf", 10, 1_000)
    leave("b" * 64, "hf:o/R-GGUF/new.gguf", 40, 2_000)
    gone = leave("c" * 64, "hf:o/R-GGUF/gone.gguf", 5, 3_000)
    gone.unlink()
    (tmp_path / ".downloads" / "stray.json").write_text("not a note")
    assert unfinished_downloads(tmp_path) == [
        Unfinished("hf:o/R-GGUF/new.gguf", 40, 100),
        Unfinished("hf:o/R-GGUF/old.gguf", 10, 100),
    ]
    assert not gone.with_suffix(".json").exists()
    assert (tmp_path / ".downloads" / "stray.json").exists()  # not Hearth's: left alone
    assert unfinished_downloads(tmp_path / "nothing-here") == []


def test_an_unfinished_split_model_counts_the_bytes_of_every_part_kept(tmp_path: Path) -> None:
    folder = tmp_path / ".downloads"
    folder.mkdir()
    (folder / f"{'a' * 64}.partial").write_bytes(b"x" * 30)  # part 1, whole
    (folder / f"{'b' * 64}.partial").write_bytes(b"x" * 12)  # part 2, begun; part 3 not yet
    note = {"reference": "hf:o/R-GGUF/m-00001-of-00003.gguf", "size": 90, "parts": ["a" * 64, "b" * 64, "c" * 64]}
    (folder / f"{'a' * 64}.json").write_text(json.dumps(note))
    (folder / f"{'d' * 64}.json").write_text(json.dumps({**note, "parts": ["../../etc/passwd"]}))  # not Hearth's
    assert unfinished_downloads(tmp_path) == [Unfinished("hf:o/R-GGUF/m-00001-of-00003.gguf", 42, 90)]
