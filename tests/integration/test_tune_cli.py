"""`hearth tune` and `hearth adapters` refusing bad input: one clear message with what to do, exit code 1, and
nothing started or stored. Run in this process through the real CLI entry point (each refusal happens before any
model loads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.main import main
from app.paths import resolve_data_paths

pytestmark = pytest.mark.integration

GOOD = '{"prompt": "Say hi", "completion": "Hi!"}\n'


def tune(capsys: pytest.CaptureFixture[str], data: Path, *flags: str) -> str:
    code = main(["tune", str(data), "--name", "mine", *flags])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "what to do:" in err and "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "has no examples"),
        (b"\n\n", "has no examples"),
        (b"this is not json\n", "line 1: is not JSON"),
        (GOOD.encode() + b'{"question": "x", "answer": "y"}\n', 'line 2: has "answer", "question"; expected'),
        (b'{"messages": [{"role": "user", "content": "hi"}]}\n', "line 1: has no assistant message"),
        (b'{"messages": [{"role": "robot", "content": "hi"}]}\n', 'line 1: message 1 has role "robot"'),
        (GOOD.encode() + b'{"text": "caf\xe9"}\n', "line 2: is not UTF-8 text (byte 0xe9"),
        (b'{"text": "' + b"x" * 10_000_000 + b'"}\n', "line 1: is 10.0 MB; one example may be at most 1 MB"),
        (b"[1, 2]\n" + GOOD.encode() + b"nope\n", "line 1: is a JSON list, not an object (1 more bad line after it)"),
        (b"[" * 200_000 + b"]" * 200_000 + b"\n", "line 1: nests lists or objects thousands deep"),
    ],
    ids=["empty", "blank", "not-json", "wrong-keys", "no-assistant", "bad-role", "not-utf8", "10MB", "two-bad", "deep"],
)
def test_bad_training_data_is_refused_naming_the_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, isolated_home: Path, content: bytes, expected: str
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_bytes(content)
    assert expected in tune(capsys, data)
    assert not resolve_data_paths(isolated_home).tuning_dir.exists()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (("--rank", "0"), "A rank of 0 is out of range"),
        (("--rank", "1000000"), "A rank of 1000000 is out of range"),
        (("--learning-rate", "nan"), "A learning rate of nan is not usable"),
        (("--learning-rate", "-1"), "A learning rate of -1.0 is not usable"),
        (("--max-length", "4"), "A max length of 4 tokens is out of range"),
        (("--targets", "q_proj,wings"), "Unknown layer names: wings"),
    ],
)
def test_settings_out_of_range_are_refused_with_a_usual_value(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: tuple[str, ...], expected: str
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(GOOD, encoding="utf-8")
    assert expected in tune(capsys, data, *flags)


def test_a_missing_data_file_and_a_bad_name_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert "Training data not found" in tune(capsys, tmp_path / "nope.jsonl")
    data = tmp_path / "data.jsonl"
    data.write_text(GOOD, encoding="utf-8")
    assert main(["tune", str(data), "--name", "../escape"]) == 1
    assert "cannot name an adapter" in capsys.readouterr().err


def test_adapters_lists_none_and_refuses_unknown_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["adapters"]) == 0
    assert "No adapters yet" in capsys.readouterr().out
    assert main(["adapters", "remove", "ghost"]) == 1
    err = capsys.readouterr().err
    assert "There is no adapter named 'ghost'" in err and "what to do:" in err
    assert main(["chat", "hi", "--adapter", "ghost"]) == 1
    assert "There is no adapter named 'ghost'" in capsys.readouterr().err
