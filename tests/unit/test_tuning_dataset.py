"""Training data is checked whole before anything trains: each bad line is named with its number and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.base import ChatMessage
from models.shared.errors import TrainingDataError
from models.tuning.dataset import (
    MAX_EXAMPLE_BYTES,
    MAX_HELD_OUT,
    ChatExample,
    Example,
    TextExample,
    held_out_count,
    parse_example,
    parse_lines,
    read_examples,
    split_examples,
)


def lines(*texts: str | bytes) -> list[tuple[int, bytes]]:
    return [(number, t if isinstance(t, bytes) else t.encode()) for number, t in enumerate(texts, start=1)]


def write(path: Path, *items: object) -> Path:
    path.write_text("".join((i if isinstance(i, str) else json.dumps(i)) + "\n" for i in items), encoding="utf-8")
    return path


def test_a_chat_keeps_its_messages_in_order() -> None:
    item = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
        ]
    }
    assert parse_example(item) == ChatExample(
        (ChatMessage("system", "Be brief."), ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello."))
    )


def test_prompt_and_completion_read_as_a_user_turn_and_an_answer() -> None:
    assert parse_example({"prompt": "2+2?", "completion": "4"}) == ChatExample(
        (ChatMessage("user", "2+2?"), ChatMessage("assistant", "4"))
    )


def test_plain_text() -> None:
    assert parse_example({"text": "Once upon a time."}) == TextExample("Once upon a time.")


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ([1, 2], "is a JSON list, not an object"),
        ("hello", "is a JSON string, not an object"),
        (None, "is a JSON null, not an object"),
        (True, "is a JSON true/false, not an object"),
        (3, "is a JSON number, not an object"),
        ({"question": "q", "answer": "a"}, '"answer", "question"; expected "messages"'),
        ({}, "has no keys;"),
        ({"prompt": "only a prompt"}, '"prompt"; expected'),
        ({"messages": []}, '"messages" must be a non-empty list'),
        ({"messages": "hi"}, '"messages" must be a non-empty list'),
        ({"messages": ["hi"]}, "message 1 is not an object"),
        ({"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]}, 'message 2 has role "bot"'),
        ({"messages": [{"content": "a"}]}, "message 1 has role null"),
        ({"messages": [{"role": "assistant", "content": 5}]}, 'message 1 has no text "content"'),
        ({"messages": [{"role": "user", "content": "hi"}]}, "no assistant message with text"),
        ({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "  "}]}, "no assistant"),
        ({"prompt": "p", "completion": 4}, '"prompt" and "completion" must both be text'),
        ({"prompt": None, "completion": "c"}, '"prompt" and "completion" must both be text'),
        ({"prompt": "p", "completion": " \n"}, '"completion" is empty'),
        ({"text": ["a"]}, '"text" must be text'),
        ({"text": "   "}, '"text" is empty'),
    ],
)
def test_a_bad_example_says_why(item: object, reason: str) -> None:
    parsed = parse_example(item)
    assert isinstance(parsed, str)
    assert reason in parsed


def test_parse_lines_skips_blank_lines_and_numbers_the_bad_ones() -> None:
    examples, bad = parse_lines(lines('{"text": "a"}', "", "   \n", "{not json", '{"text": "b"}', "[1]"))
    assert examples == [TextExample("a"), TextExample("b")]
    assert [b.number for b in bad] == [4, 6]
    assert bad[0].reason.startswith("is not JSON")
    assert bad[1].reason == "is a JSON list, not an object"


def test_a_line_that_is_not_utf8_is_named_with_its_byte() -> None:
    examples, bad = parse_lines(lines('{"text": "fine"}', b'{"text": "caf\xe9"}'))
    assert examples == [TextExample("fine")]
    assert len(bad) == 1
    assert bad[0].number == 2
    assert "not UTF-8" in bad[0].reason
    assert "0xe9" in bad[0].reason
    assert "column 14" in bad[0].reason


def test_an_oversized_line_is_refused_without_decoding() -> None:
    # Invalid UTF-8 and not JSON: only the size check can have produced the reason.
    huge = b"\xff" * (MAX_EXAMPLE_BYTES + 1)
    at_limit = b'{"text": "' + b"x" * (MAX_EXAMPLE_BYTES - 12) + b'"}'
    assert len(at_limit) == MAX_EXAMPLE_BYTES
    examples, bad = parse_lines([(1, huge), (2, at_limit)])
    assert [b.number for b in bad] == [1]
    assert "at most 1 MB" in bad[0].reason
    assert "UTF-8" not in bad[0].reason
    assert len(examples) == 1


def test_read_examples_reads_a_file(tmp_path: Path) -> None:
    path = write(tmp_path / "d.jsonl", {"text": "a"}, "", {"prompt": "p", "completion": "c"})
    assert read_examples(path) == [
        TextExample("a"),
        ChatExample((ChatMessage("user", "p"), ChatMessage("assistant", "c"))),
    ]


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_a_file_without_examples_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TrainingDataError, match="no examples") as caught:
        read_examples(path)
    assert caught.value.remedy


def test_a_missing_file_and_a_folder_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TrainingDataError, match="not found"):
        read_examples(tmp_path / "nope.jsonl")
    with pytest.raises(TrainingDataError, match="is a folder"):
        read_examples(tmp_path)


def test_the_first_bad_line_is_named_and_the_rest_counted(tmp_path: Path) -> None:
    path = write(tmp_path / "d.jsonl", {"text": "ok"}, {"text": ""}, "[]", "nope", {"text": "ok"})
    with pytest.raises(TrainingDataError) as caught:
        read_examples(path)
    assert "d.jsonl, line 2: " in caught.value.message
    assert '"text" is empty' in caught.value.message
    assert "(2 more bad lines after it)" in caught.value.message
    assert '{"messages"' in caught.value.remedy


def test_one_more_bad_line_is_singular(tmp_path: Path) -> None:
    path = write(tmp_path / "d.jsonl", {"text": "ok"}, "[]", "[]")
    with pytest.raises(TrainingDataError, match=r"line 2: .*\(1 more bad line after it\)"):
        read_examples(path)


def test_a_single_bad_line_mentions_no_others(tmp_path: Path) -> None:
    path = write(tmp_path / "d.jsonl", {"text": "ok"}, "[]")
    with pytest.raises(TrainingDataError) as caught:
        read_examples(path)
    assert "line 2" in caught.value.message
    assert "more bad" not in caught.value.message


@pytest.mark.parametrize(
    ("total", "held"),
    [(0, 0), (1, 0), (9, 0), (10, 1), (19, 1), (20, 2), (105, 10), (2000, 200), (1_000_000, MAX_HELD_OUT)],
)
def test_held_out_count(total: int, held: int) -> None:
    assert held_out_count(total) == held


def numbered(count: int) -> list[Example]:
    return [TextExample(f"example {i}") for i in range(count)]


def test_split_is_deterministic_disjoint_and_complete() -> None:
    examples = numbered(25)
    split = split_examples(examples, seed=7)
    assert split == split_examples(examples, seed=7)
    assert len(split.held_out) == 2
    assert len(split.train) == 23
    assert not set(split.train) & set(split.held_out)
    assert set(split.train) | set(split.held_out) == set(examples)
    assert not split.checked_on_training_data
    # Both halves keep the file's order.
    assert list(split.train) == [e for e in examples if e in split.train]


def test_different_seeds_hold_out_different_examples() -> None:
    examples = numbered(100)
    held = {split_examples(examples, seed=seed).held_out for seed in range(5)}
    assert len(held) > 1


def test_fewer_than_ten_examples_are_all_trained_on() -> None:
    examples = numbered(9)
    split = split_examples(examples)
    assert split.held_out == ()
    assert split.train == tuple(examples)
    assert split.checked_on_training_data


def test_a_line_nested_thousands_deep_is_a_bad_line_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text('{"text": "fine"}\n' + "[" * 200_000 + "]" * 200_000 + "\n")
    with pytest.raises(TrainingDataError) as caught:
        read_examples(path)
    assert "deep.jsonl, line 2: nests lists or objects thousands deep" in caught.value.message


def test_a_line_far_longer_than_the_limit_is_measured_without_being_held(tmp_path: Path) -> None:
    import tracemalloc

    path = tmp_path / "one-line.jsonl"
    with path.open("wb") as out:  # 40 MB and no newline at all
        for _ in range(40):
            out.write(b"x" * (1 << 20))
    with path.open("ab") as out:
        out.write(b'\n{"text": "after"}\n')
    tracemalloc.start()
    try:
        with pytest.raises(TrainingDataError) as caught:
            read_examples(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "line 1: is 41.9 MB; one example may be at most 1 MB" in caught.value.message
    assert peak < 8 * MAX_EXAMPLE_BYTES  # a few chunks of the line at a time, never the whole of it
