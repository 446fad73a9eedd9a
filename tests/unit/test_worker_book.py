"""The paired workers' book: which links the pipeline uses, a damaged or pre-TLS entry, removing what is not there."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from app.services.workers import PairedWorker, WorkerBook, WorkerRefused
from backends.base import WorkerLink
from backends.workers.pairing import WorkerFacts


def _entry(address: str, rpc: str) -> dict[str, object]:
    facts = WorkerFacts(rpc, "CPU: Test", 1 << 30, 2, "0.1.0", "0.3.36")
    return asdict(PairedWorker(address, f"token-{address}", "f" * 64, facts, 0.2))


def _links(book: WorkerBook, chosen: list[str] | None = None) -> tuple[WorkerLink, ...]:
    return tuple(worker.link for worker in book.chosen(chosen or ()))


def test_the_pipeline_uses_every_paired_worker_or_the_ones_named(tmp_path: Path) -> None:
    book_file = tmp_path / "workers.json"
    book_file.write_text(json.dumps([_entry("127.0.0.1:50052", "127.0.0.1:41000"), _entry("10.0.0.2:50052", "x:1")]))
    book = WorkerBook(book_file)
    assert _links(book) == (
        WorkerLink("127.0.0.1:50052", "f" * 64, "token-127.0.0.1:50052"),
        WorkerLink("10.0.0.2:50052", "f" * 64, "token-10.0.0.2:50052"),
    )
    assert [link.address for link in _links(book, ["10.0.0.2"])] == ["10.0.0.2:50052"]  # the default port filled in
    assert "token" not in repr(_links(book)[0])  # a secret: never in a log line
    with pytest.raises(WorkerRefused) as refused:
        _links(book, ["127.0.0.1:6000"])
    assert "not paired" in refused.value.message and "hearth workers add 127.0.0.1:6000" in refused.value.remedy


def test_a_damaged_entry_is_skipped_and_a_damaged_book_is_empty(tmp_path: Path) -> None:
    book_file = tmp_path / "workers.json"
    before_tls = {k: v for k, v in _entry("10.0.0.9:50052", "x:1").items() if k != "fingerprint"}
    book_file.write_text(json.dumps([{"address": "a:1"}, before_tls, _entry("127.0.0.1:50052", "127.0.0.1:41000")]))
    assert [w.address for w in WorkerBook(book_file).paired()] == ["127.0.0.1:50052"]
    book_file.write_text("{not json")
    assert WorkerBook(book_file).paired() == [] and _links(WorkerBook(tmp_path / "none.json")) == ()


def test_removing_a_worker_that_is_not_paired_says_where_to_look(tmp_path: Path) -> None:
    with pytest.raises(WorkerRefused) as refused:
        WorkerBook(tmp_path / "workers.json").remove("127.0.0.1:50052")
    assert "hearth workers list" in refused.value.remedy
