"""The key the page's browser storage is sealed with: made once, owner-only, kept across starts."""

from pathlib import Path

from app.ui.page_key import MIN_LENGTH, page_key


def test_the_key_is_made_once_private_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "page.key"
    first = page_key(path)
    assert len(first) >= MIN_LENGTH
    assert path.stat().st_mode & 0o777 == 0o600
    assert page_key(path) == first
    assert [p.name for p in tmp_path.iterdir()] == ["page.key"]  # no temporary file left behind


def test_an_empty_or_damaged_key_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "page.key"
    path.write_text("")
    made = page_key(path)
    assert len(made) >= MIN_LENGTH and path.read_text() == made
    path.write_bytes(b"\xff\xfe not ascii")
    assert page_key(path) not in ("", made)
