"""The suite's kept vectors (tests/kept_vectors.py): a text embedded once is not embedded again by the next run, a
changed text is, and what comes back is what was computed, row for row."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tests.kept_vectors import KeptVectors, model_identity


class Counting:
    """A four-dimensional embedder whose vectors depend on the text, counting the texts it embeds."""

    name, dimension, max_tokens = "counting", 4, 16

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def tokenizer(self) -> Any:
        return None

    def set_threads(self, threads: int) -> None:
        del threads

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded += texts
        return np.array([[len(t), t.count("a"), t.count("e"), 1.0] for t in texts], dtype=np.float32)


def test_a_text_is_embedded_once_across_runs_and_a_changed_one_again(tmp_path: Path) -> None:
    first_model = Counting()
    first = KeptVectors(first_model, "m", tmp_path)
    expected = first.embed(["alpha", "beta", "gamma"])
    first.close()

    model = Counting()
    again = KeptVectors(model, "m", tmp_path)
    got = again.embed(["gamma", "alpha", "delta", "beta"])
    assert model.embedded == ["delta"]  # only the text never seen
    assert np.array_equal(got[[1, 3, 0]], expected)
    assert np.array_equal(got[2], Counting().embed(["delta"])[0])
    assert (again.computed, again.kept) == (1, 3)
    again.close()

    other = Counting()
    KeptVectors(other, "another model", tmp_path).embed(["alpha"])
    assert other.embedded == ["alpha"]  # kept per model: another one computes its own


def test_a_row_cut_short_is_computed_again(tmp_path: Path) -> None:
    KeptVectors(Counting(), "m", tmp_path).embed(["alpha"])
    with sqlite3.connect(tmp_path / "m.sqlite") as db:
        db.execute("UPDATE vectors SET vector = substr(vector, 1, 6)")
    model = Counting()
    got = KeptVectors(model, "m", tmp_path).embed(["alpha"])
    assert model.embedded == ["alpha"] and got[0].tolist() == [5.0, 2.0, 0.0, 1.0]


def test_the_identity_changes_with_the_model_files(tmp_path: Path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"\0" * 3000)
    before = model_identity(Counting(), tmp_path)
    assert model_identity(Counting(), tmp_path) == before
    (tmp_path / "weights.bin").write_bytes(b"\1" * 3000)
    assert model_identity(Counting(), tmp_path) != before
