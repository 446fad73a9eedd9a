"""The page secret's rules (app.api.page_gate) and the upload check (app.ui.page_uploads): pure."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.api.locked_page import locked_page_html
from app.api.page_gate import PageGate, cookie_value, new_page_secret, offered_token, wants_page
from app.ui.page_uploads import PageUploads
from models.shared.errors import NotAnUpload

GATE = PageGate(7860, "s3cret-s3cret-s3cret")


def test_each_start_gets_a_new_long_secret() -> None:
    first, second = new_page_secret(), new_page_secret()
    assert first != second and len(first) >= 40


def test_the_cookie_is_named_after_the_port_and_kept_from_scripts_and_other_sites() -> None:
    assert GATE.cookie_name == "hearth-page-7860"
    assert PageGate(7861, GATE.secret).cookie_name != GATE.cookie_name
    cookie = GATE.set_cookie()
    assert cookie.startswith("hearth-page-7860=s3cret-s3cret-s3cret;")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie


@pytest.mark.parametrize(
    ("header", "admitted"),
    [
        ("hearth-page-7860=s3cret-s3cret-s3cret", True),
        ("theme=dark; hearth-page-7860=s3cret-s3cret-s3cret; other=1", True),
        (None, False),
        ("", False),
        ("hearth-page-7860=wrong", False),
        ("hearth-page-7861=s3cret-s3cret-s3cret", False),  # another Hearth's cookie
        ("hearth-page-7860=s3cret-s3cret-s3cre", False),
        ('hearth-page-7860="unterminated', False),
    ],
)
def test_a_request_is_admitted_only_with_this_ports_cookie_holding_this_starts_secret(
    header: str | None, admitted: bool
) -> None:
    assert GATE.admits(header) is admitted


@pytest.mark.parametrize(
    ("path", "query", "offered"),
    [
        ("/", b"token=abc", "abc"),
        ("/", b"__theme=dark&token=abc", "abc"),
        ("/", b"token=", ""),
        ("/", b"", None),
        ("/", b"other=1", None),
        ("/config", b"token=abc", None),  # only the page's own address exchanges the secret
        ("/", b"token=%ff", "\ufffd"),
    ],
)
def test_only_the_page_address_offers_a_secret(path: str, query: bytes, offered: str | None) -> None:
    assert offered_token(path, query) == offered


def test_the_entry_address_carries_the_secret_and_matches_it() -> None:
    assert GATE.entry_path() == "/?token=s3cret-s3cret-s3cret"
    assert GATE.matches(offered_token("/", GATE.entry_path().split("?", 1)[1].encode()))
    assert not GATE.matches(None) and not GATE.matches("s3cret")


def test_a_person_opening_the_address_gets_a_page_and_programs_get_an_error() -> None:
    assert wants_page("GET", "/", None)
    assert wants_page("GET", "/gradio_api/file=x", "text/html,application/xhtml+xml")
    assert not wants_page("GET", "/config", "application/json")
    assert not wants_page("POST", "/", "text/html")


def test_the_locked_page_says_how_to_get_in_and_holds_no_script() -> None:
    first, stale = locked_page_html(stale=False), locked_page_html(stale=True)
    for html in (first, stale):
        assert "hearth ui" in html and "hearth open" in html and "<script" not in html
    assert "earlier start" in stale and "earlier start" not in first


def test_cookie_values_are_read_by_name() -> None:
    assert cookie_value("a=1; b=2", "b") == "2"
    assert cookie_value("a=1", "b") is None


def test_only_files_the_upload_route_stored_are_taken(tmp_path: Path) -> None:
    stored = {str(tmp_path / "run-1" / "abc" / "notes.md")}
    uploads = PageUploads(lambda: stored)
    assert uploads.checked([tmp_path / "run-1" / "abc" / "notes.md"]) == [tmp_path / "run-1" / "abc" / "notes.md"]
    assert uploads.was_uploaded(str(tmp_path / "run-1" / "abc" / ".." / "abc" / "notes.md"))
    for foreign in ("/etc/passwd", str(tmp_path / "run-1" / "abc" / "other.md"), str(tmp_path / "run-1")):
        with pytest.raises(NotAnUpload) as refused:
            uploads.checked([str(tmp_path / "run-1" / "abc" / "notes.md"), foreign])
        assert "upload box" in refused.value.remedy
    stored.add("/etc/passwd")  # read at each check: an upload made after the page was built counts
    assert uploads.was_uploaded("/etc/passwd")
