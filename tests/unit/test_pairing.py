"""Pairing a main Hearth with a worker: the code is proven, never sent, and bound to the certificate the main saw;
the worker proves it knows the code too; a code pairs once; versions must match; tokens gate `info` and `rpc`."""

from __future__ import annotations

import re

from backends.pairing import (
    WorkerFacts,
    WorkerState,
    facts_from,
    new_code,
    normalise_code,
    pair_request,
    proof,
    worker_proved,
)

FACTS = WorkerFacts("127.0.0.1:50100", "CPU: Test CPU", 8 << 30, 4, "0.1.0", "0.3.36")
MINE = "a1" * 32  # the worker's certificate fingerprint
THEIRS = "b2" * 32  # one a machine in the middle would show


def test_codes_are_easy_to_read_and_type() -> None:
    code = new_code()
    assert re.fullmatch(r"[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}", code)
    assert normalise_code(code.lower().replace("-", " ")) == code.replace("-", "")
    assert proof(code, "n" * 32, MINE) == proof(code.lower(), "n" * 32, MINE)
    assert proof(code, "n" * 32, MINE) != proof(code, "n" * 32, THEIRS)


def test_the_right_code_pairs_both_sides_prove_it_and_the_code_itself_never_travels() -> None:
    worker = WorkerState("ABCD-EFGH", MINE, FACTS)
    request = pair_request("abcd efgh", MINE, "0.1.0", "0.3.36")
    assert "ABCD" not in str(request) and "abcd" not in str(request)
    reply = worker.answer(request)
    assert reply["token"] in worker.tokens
    assert facts_from(reply) == FACTS
    measured = {"facts": {**reply["facts"], "read_bytes_per_s": 9.5e9}}
    assert facts_from(measured).read_bytes_per_s == 9.5e9  # a worker's memory read speed, measured at its start
    before = {"facts": {k: v for k, v in reply["facts"].items() if k != "read_bytes_per_s"}}
    assert facts_from(before).read_bytes_per_s == 0.0  # a book written before workers measured it
    assert worker_proved("ABCD-EFGH", request, MINE, reply)
    assert not worker_proved("ABCD-EFGX", request, MINE, reply)  # a worker that did not know the code
    assert not worker_proved("ABCD-EFGH", request, MINE, {**reply, "proof": "0" * 64})
    assert worker.answer({"op": "info", "token": reply["token"]})["facts"]["rpc"] == "127.0.0.1:50100"
    assert worker.answer({"op": "rpc", "token": reply["token"]}) == {"ok": True}


def test_a_proof_made_for_another_certificate_is_refused() -> None:
    # the main talked to a machine in the middle, which forwards its request to the real worker
    worker = WorkerState("ABCD-EFGH", MINE, FACTS)
    refused = worker.answer(pair_request("ABCD-EFGH", THEIRS, "0.1.0", "0.3.36"))
    assert refused["error"] == "Wrong or already used pairing code." and not worker.tokens


def test_a_code_pairs_once_and_a_wrong_one_is_used_up_too() -> None:
    worker = WorkerState("ABCD-EFGH", MINE, FACTS)
    assert "token" in worker.answer(pair_request("ABCD-EFGH", MINE, "0.1.0", "0.3.36"))
    assert worker.code != "ABCD-EFGH"
    again = worker.answer(pair_request("ABCD-EFGH", MINE, "0.1.0", "0.3.36"))  # a second main, the same code
    assert again["error"] == "Wrong or already used pairing code." and "printed a new one" in again["remedy"]
    guessed = worker.code
    worker.answer(pair_request("ZZZZ-ZZZZ", MINE, "0.1.0", "0.3.36"))
    assert worker.code != guessed and len(worker.tokens) == 1  # a code learnt after a wrong try is dead


def test_incomplete_requests_and_bad_tokens_are_refused() -> None:
    worker = WorkerState("ABCD-EFGH", MINE, FACTS)
    assert "error" in worker.answer({"op": "pair", "version": "0.1.0", "llama_cpp": "0.3.36", "nonce": "short"})
    assert worker.code == "ABCD-EFGH"  # not a try at the code
    assert "not paired" in worker.answer({"op": "info", "token": "made-up"})["error"]
    assert "not paired" in worker.answer({"op": "info"})["error"]
    assert "not paired" in worker.answer({"op": "rpc", "token": "made-up"})["error"]


def test_another_version_is_refused_with_both_versions_named() -> None:
    refused = WorkerState("ABCD-EFGH", MINE, FACTS).answer(pair_request("ABCD-EFGH", MINE, "0.2.0", "0.3.36"))
    assert "Hearth 0.1.0" in refused["error"] and "Hearth 0.2.0" in refused["error"]
    assert "same Hearth version" in refused["remedy"]


def test_ping_and_unknown_requests() -> None:
    worker = WorkerState("ABCD-EFGH", MINE, FACTS)
    assert worker.answer({"op": "ping"}) == {"pong": True}
    assert "Unknown request" in worker.answer({"op": "format-disk"})["error"]


def test_a_bandwidth_test_needs_a_token_and_a_sensible_size() -> None:
    worker = WorkerState("ABCD-EFGH", MINE, FACTS)
    token = worker.answer(pair_request("ABCD-EFGH", MINE, "0.1.0", "0.3.36"))["token"]
    assert worker.answer({"op": "sink", "token": token, "bytes": 2 << 20}) == {"ready": 2 << 20}
    assert "not paired" in worker.answer({"op": "sink", "token": "made-up", "bytes": 10})["error"]
    for size in (0, -1, (64 << 20) + 1, "10", None):
        assert "error" in worker.answer({"op": "sink", "token": token, "bytes": size})
