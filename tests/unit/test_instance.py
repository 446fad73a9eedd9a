import os
from pathlib import Path

from app.services.serving.instance import ServerRecord, read_record, remove_record, write_record


def test_a_record_is_read_back_while_its_process_lives_and_only_its_owner_can_read_it(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    url = "http://127.0.0.1:7860/"
    record = ServerRecord(url, f"{url}v1", os.getpid(), f"{url}?token=abc")
    old_umask = os.umask(0o022)
    try:
        write_record(path, record)
    finally:
        os.umask(old_umask)
    assert read_record(path) == record
    assert path.stat().st_mode & 0o777 == 0o600  # it holds the page secret
    # A record written by an older Hearth has no entry address: the plain one stands in.
    path.write_text(f'{{"url": "{url}", "api_url": "{url}v1", "pid": {os.getpid()}}}')
    assert read_record(path) == ServerRecord(url, f"{url}v1", os.getpid(), url)


def test_a_record_left_by_a_dead_process_or_damaged_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    assert read_record(path) is None
    write_record(path, ServerRecord("u", "a", 2**22 + 12345))  # above Linux's largest pid
    assert read_record(path) is None
    path.write_text("{not json")
    assert read_record(path) is None


def test_only_the_owner_removes_the_record(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    write_record(path, ServerRecord("u", "a", os.getpid()))
    remove_record(path, os.getpid() + 1)
    assert path.exists()
    remove_record(path, os.getpid())
    assert not path.exists()
