"""The desktop window's pure parts and its single-instance lock (real sockets and locks, no window)."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import pytest

from app.cli.main import ui_arguments
from app.cli.parser import build_parser
from app.desktop.geometry import DEFAULT_HEIGHT, DEFAULT_WIDTH, MIN_WIDTH, WindowSize, load_size, sane_size, save_size
from app.desktop.pages import exit_words, splash_page, status_script, stopped_page
from app.desktop.single import SingleInstance, socket_path
from app.desktop.toolkit import check_toolkit


@pytest.mark.parametrize(
    ("width", "height", "expected"),
    [
        (1400, 900, WindowSize(1400, 900)),
        (100, 900, WindowSize(MIN_WIDTH, 900)),
        ("wide", 900, WindowSize()),
        (True, 900, WindowSize()),
        (10**9, 900, WindowSize()),
        (None, None, WindowSize()),
    ],
)
def test_a_remembered_size_is_held_to_what_a_window_can_be(width: object, height: object, expected: WindowSize) -> None:
    assert sane_size(width, height) == expected


def test_the_size_survives_a_restart_and_a_damaged_file_gives_the_default(tmp_path: Path) -> None:
    path = tmp_path / "window.json"
    assert load_size(path) == WindowSize(DEFAULT_WIDTH, DEFAULT_HEIGHT)
    save_size(path, WindowSize(1300, 700))
    assert load_size(path) == WindowSize(1300, 700)
    assert path.stat().st_mode & 0o077 == 0
    path.write_text("[1, 2")
    assert load_size(path) == WindowSize()
    path.write_text("[1, 2]")
    assert load_size(path) == WindowSize()


def test_the_pages_escape_what_the_server_printed_and_hide_its_secret() -> None:
    page = stopped_page(
        "The Hearth server exited (status 1).",
        ["<script>alert(1)</script>", "Hearth is running at http://127.0.0.1:7860/?token=abc-DEF_123  (Ctrl+C)"],
    )
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert "abc-DEF_123" not in page and "token=…" in page
    assert "api.restart()" in page and "setTimeout(restartServer, 100)" in page  # waits for the bridge
    assert "It printed nothing." in stopped_page("x", [])
    assert "&lt;b&gt;" in splash_page("<b>")
    assert status_script('say "hi"</script>').endswith('("say \\"hi\\"</script>")')


def test_exit_statuses_read_as_words() -> None:
    assert exit_words(-9) == "The Hearth server was ended by SIGKILL."
    assert exit_words(2) == "The Hearth server exited (status 2)."
    assert exit_words(-200) == "The Hearth server was ended by signal 200."


def test_a_second_instance_asks_the_first_to_show_its_window(tmp_path: Path) -> None:
    first, second = SingleInstance(tmp_path), SingleInstance(tmp_path)
    shown = threading.Event()
    assert first.acquire()
    try:
        first.serve(shown.set)
        assert not second.acquire()
        assert second.ask_to_show(wait_s=5)
        assert shown.is_set()
    finally:
        first.release()
    assert not (tmp_path / "desktop.sock").exists()
    assert second.acquire()  # the lock is free once the first has gone
    second.release()


def test_a_socket_left_by_a_killed_first_instance_does_not_block_the_next(tmp_path: Path) -> None:
    (tmp_path / "desktop.sock").write_text("")  # what a killed process leaves: the file, no listener, no lock
    instance = SingleInstance(tmp_path)
    assert instance.acquire()
    instance.release()


def test_nobody_answers_when_no_first_instance_listens(tmp_path: Path) -> None:
    assert not SingleInstance(tmp_path).ask_to_show(wait_s=0.5)


def test_a_data_folder_too_deep_for_a_socket_gets_one_in_a_private_folder_it_names(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    assert socket_path(deep) is None  # no first instance yet
    first, second = SingleInstance(deep), SingleInstance(deep)
    assert first.acquire()
    try:
        path = socket_path(deep)
        assert path is not None and len(os.fsencode(path)) <= 100
        assert path.parent.stat().st_mode & 0o077 == 0 and path.parent.stat().st_uid == os.getuid()
        first.serve(lambda: None)
        assert not second.acquire()
        assert second.ask_to_show(wait_s=5)
    finally:
        first.release()
    assert not path.parent.exists()  # taken away with the first instance


def test_a_folder_another_account_made_first_cannot_lock_the_window_out(tmp_path: Path) -> None:
    # what the old fallback used: a fixed name under the temporary directory, which anyone may create first
    squatted = Path(tempfile.gettempdir()) / f"hearth-{os.getuid()}"
    made = not squatted.exists()
    if made:
        squatted.mkdir(mode=0o755)
        if os.getuid() == 0:
            os.chown(squatted, 65534, 65534)  # nobody's
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    try:
        first = SingleInstance(deep)
        assert first.acquire()
        path = socket_path(deep)
        assert path is not None and path.parent != squatted
        first.release()
    finally:
        if made:
            squatted.rmdir()


def test_a_data_folder_the_socket_cannot_be_made_in_is_a_hearth_message(tmp_path: Path) -> None:
    from app.desktop.single import InstanceSocketError

    (tmp_path / "desktop.sock").mkdir()  # in the way: neither removable as a file nor bindable
    with pytest.raises(InstanceSocketError) as failed:
        SingleInstance(tmp_path).acquire()
    assert "could not listen" in failed.value.message and str(tmp_path) in failed.value.remedy
    (tmp_path / "desktop.sock").rmdir()
    again = SingleInstance(tmp_path)
    assert again.acquire()  # the failed one let go of the lock
    again.release()


def test_the_window_passes_the_model_flags_to_the_server_it_starts() -> None:
    args = build_parser().parse_args(["desktop", "--model", "/m/q.gguf", "--threads", "3", "--port", "7999"])
    assert ui_arguments(args) == ["--model", "/m/q.gguf", "--threads", "3", "--port", "7999"]
    assert ui_arguments(build_parser().parse_args(["desktop", "--gpu-layers", "0"])) == ["--gpu-layers", "0"]
    assert build_parser().parse_args(["ui", *ui_arguments(args)]).port == 7999


def test_without_a_display_no_window_is_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    missing = check_toolkit()
    assert missing is not None
    assert "no desktop display" in missing.reason and "hearth ui --open" in missing.remedy
