"""Pairing a main Hearth with a worker: the code is proven, never sent, and bound to the certificate the main saw;
the worker proves it knows the code too; a code pairs once; versions must match; tokens gate `info` and `rpc`."""

from __future__ import annotations

import re

import pytest

from backends.workers.pairing import (
    PAUSE_AFTER_WRONG,
    WorkerFacts,
    WorkerState,
    facts_from,
    new_code,
    normalise_code,
    pair_request,
    parse_request,
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
    worker.answer(pair_request("ZZZZ-ZZZZ", MINE, "0.1.0", "0.3.36"), "elsewhere")
    assert worker.code != guessed and len(worker.tokens) == 1  # a code learnt after a wrong try is dead


def _wrong(worker: WorkerState, source: str, now: float) -> dict[str, object]:
    return worker.answer(
        pair_request("ZZZZ-ZZZZ" if worker.code != "ZZZZ-ZZZZ" else "YYYY-YYYY", MINE, *V), source, now
    )


V = ("0.1.0", "0.3.36")


def test_wrong_codes_in_a_loop_burn_one_code_per_wait_and_the_owner_still_pairs() -> None:
    worker = WorkerState("ABCD-EFGH", MINE, FACTS)
    codes = {worker.code}
    for step in range(1500):  # one account sending wrong proofs as fast as it can, over 3 s
        _wrong(worker, "account 65534", step * 0.002)
        codes.add(worker.code)
    assert len(codes) == 3  # burnt at 0 s and again after its 2 s wait; every other try was refused unread
    blocked = _wrong(worker, "account 65534", 3.0)
    assert "Too many wrong pairing codes from here" in str(blocked["error"]) and "3 s" in str(blocked["error"])
    assert not worker.paused
    paired = worker.answer(pair_request(worker.code, MINE, *V), "account 1000", 3.0)  # the owner's main
    assert paired["token"] in worker.tokens


def test_a_wait_doubles_with_each_wrong_code_from_the_same_place() -> None:
    worker = WorkerState("ABCD-EFGH", MINE, FACTS)
    _wrong(worker, "192.0.2.7", 0.0)
    assert "Too many" in str(_wrong(worker, "192.0.2.7", 1.9)["error"])
    assert "Wrong" in str(_wrong(worker, "192.0.2.7", 2.0)["error"])
    assert "Too many" in str(_wrong(worker, "192.0.2.7", 5.9)["error"])  # 4 s this time
    assert "Wrong" in str(_wrong(worker, "192.0.2.7", 6.0)["error"])


def test_pairing_pauses_after_several_wrong_codes_until_the_owner_asks_for_a_new_one() -> None:
    worker = WorkerState("ABCD-EFGH", MINE, FACTS)
    for index in range(PAUSE_AFTER_WRONG - 1):
        _wrong(worker, f"192.0.2.{index}", 0.0)
    assert not worker.paused
    last = _wrong(worker, "192.0.2.99", 0.0)
    assert worker.paused and worker.code == "" and "pairing is now paused" in str(last["error"])
    refused = worker.answer(pair_request("ABCD-EFGH", MINE, *V), "account 1000", 10.0)
    assert "Pairing is paused" in refused["error"] and "press Enter" in refused["remedy"]
    code = worker.renew_code()
    assert not worker.paused and worker.code == code
    assert "token" in worker.answer(pair_request(code, MINE, *V), "account 1000", 10.0)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (b"[]\n", "not a JSON list"),
        (b"1\n", "not a JSON int"),
        (b'"op"\n', "not a JSON str"),
        (b"[" * 2000 + b"]" * 2000 + b"\n", "nests too deep"),
        (b"{not json\n", "not JSON"),
    ],
)
def test_a_request_that_is_not_one_flat_object_is_refused_in_words(line: bytes, said: str) -> None:
    refused = parse_request(line)
    assert isinstance(refused, str) and said in refused


def test_a_request_object_is_read() -> None:
    assert parse_request(b'{"op": "ping"}\n') == {"op": "ping"}


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
