"""Pairing a main Hearth with a worker: the code is proven, never sent; versions must match; tokens gate `info`."""

from __future__ import annotations

import re

from backends.pairing import WorkerFacts, WorkerState, facts_from, new_code, normalise_code, pair_request, proof

FACTS = WorkerFacts("127.0.0.1:50100", "CPU: Test CPU", 8 << 30, 4, "0.1.0", "0.3.36")


def test_codes_are_easy_to_read_and_type() -> None:
    code = new_code()
    assert re.fullmatch(r"[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}", code)
    assert normalise_code(code.lower().replace("-", " ")) == code.replace("-", "")
    assert proof(code, "n" * 32) == proof(code.lower(), "n" * 32)


def test_the_right_code_pairs_and_the_code_itself_never_travels() -> None:
    worker = WorkerState("ABCD-EFGH", FACTS)
    request = pair_request("abcd efgh", "0.1.0", "0.3.36")
    assert "ABCD" not in str(request) and "abcd" not in str(request)
    reply = worker.answer(request)
    assert reply["token"] in worker.tokens
    assert facts_from(reply) == FACTS
    assert worker.answer({"op": "info", "token": reply["token"]})["facts"]["rpc"] == "127.0.0.1:50100"


def test_a_wrong_code_a_replayed_request_for_another_code_and_a_bad_token_are_refused() -> None:
    worker = WorkerState("ABCD-EFGH", FACTS)
    wrong = worker.answer(pair_request("ABCD-EFGX", "0.1.0", "0.3.36"))
    assert wrong["error"] == "Wrong pairing code." and "printed" in wrong["remedy"]
    assert not worker.tokens
    assert "error" in worker.answer({"op": "pair", "version": "0.1.0", "llama_cpp": "0.3.36", "nonce": "short"})
    assert "not paired" in worker.answer({"op": "info", "token": "made-up"})["error"]
    assert "not paired" in worker.answer({"op": "info"})["error"]


def test_another_version_is_refused_with_both_versions_named() -> None:
    refused = WorkerState("ABCD-EFGH", FACTS).answer(pair_request("ABCD-EFGH", "0.2.0", "0.3.36"))
    assert "Hearth 0.1.0" in refused["error"] and "Hearth 0.2.0" in refused["error"]
    assert "same Hearth version" in refused["remedy"]


def test_ping_and_unknown_requests() -> None:
    worker = WorkerState("ABCD-EFGH", FACTS)
    assert worker.answer({"op": "ping"}) == {"pong": True}
    assert "Unknown request" in worker.answer({"op": "format-disk"})["error"]
