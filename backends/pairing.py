"""Pairing a main Hearth with a `hearth worker`: the worker prints a code, the main proves it knows the code without
sending it, and gets a token it shows on every later request. Pure: messages in, messages out; ``app`` does the I/O.

One JSON object per line on the worker's control port. The main sends ``{"op": "pair", "version": …, "nonce": …,
"proof": HMAC-SHA256(code, "pair:" + nonce)}``; a worker of another Hearth or llama.cpp version refuses with the
reason, a wrong proof is refused, and a right one gets ``{"token": …}`` plus what the worker serves (its RPC address,
device, free memory, threads, versions). ``{"op": "info", "token": …}`` answers the same facts to a paired main, and
``{"op": "ping"}`` answers at once (the main measures the round-trip time with it).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I to misread
CODE_LENGTH = 8


@dataclass(frozen=True)
class WorkerFacts:
    rpc: str  # the llama.cpp RPC address the main adds
    device: str
    free_bytes: int
    threads: int
    hearth_version: str
    llama_cpp_version: str


def new_code() -> str:
    """A pairing code as the worker prints it: ABCD-EFGH."""
    raw = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    return f"{raw[:4]}-{raw[4:]}"


def normalise_code(code: str) -> str:
    return "".join(c for c in code.upper() if c.isalnum())


def proof(code: str, nonce: str) -> str:
    return hmac.new(normalise_code(code).encode(), f"pair:{nonce}".encode(), hashlib.sha256).hexdigest()


def pair_request(code: str, hearth_version: str, llama_cpp_version: str) -> dict[str, str]:
    nonce = secrets.token_hex(16)
    return {
        "op": "pair",
        "version": hearth_version,
        "llama_cpp": llama_cpp_version,
        "nonce": nonce,
        "proof": proof(code, nonce),
    }


class WorkerState:
    """The worker's side: its code, the tokens of the mains paired with it, and what it serves."""

    def __init__(self, code: str, facts: WorkerFacts, tokens: set[str] | None = None) -> None:
        self.code = code
        self.facts = facts
        self.tokens = set(tokens or ())

    def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The reply to one request; a new token is added to :attr:`tokens` (the caller saves them)."""
        op = request.get("op")
        if op == "ping":
            return {"pong": True}
        if op == "pair":
            return self._pair(request)
        if op == "info":
            if not isinstance(request.get("token"), str) or request["token"] not in self.tokens:
                return {"error": "This main Hearth is not paired with this worker.", "remedy": "Pair it again."}
            return {"facts": asdict(self.facts)}
        return {"error": f"Unknown request {op!r}.", "remedy": "Use the same Hearth version on both machines."}

    def _pair(self, request: Mapping[str, Any]) -> dict[str, Any]:
        theirs = (request.get("version"), request.get("llama_cpp"))
        ours = (self.facts.hearth_version, self.facts.llama_cpp_version)
        if theirs != ours:
            return {
                "error": f"This worker runs Hearth {ours[0]} with llama.cpp {ours[1]}; the main runs Hearth "
                f"{theirs[0]} with llama.cpp {theirs[1]}.",
                "remedy": "Install the same Hearth version on both machines, then pair again.",
            }
        nonce, given = request.get("nonce"), request.get("proof")
        if not isinstance(nonce, str) or not isinstance(given, str) or len(nonce) < 16:
            return {"error": "The pairing request is incomplete.", "remedy": "Pair with `hearth workers add`."}
        if not hmac.compare_digest(proof(self.code, nonce), given):
            return {"error": "Wrong pairing code.", "remedy": "Type the code the worker printed (pairing code: …)."}
        token = secrets.token_urlsafe(24)
        self.tokens.add(token)
        return {"token": token, "facts": asdict(self.facts)}


def facts_from(reply: Mapping[str, Any]) -> WorkerFacts:
    raw = reply.get("facts")
    if not isinstance(raw, dict):
        raise ValueError("no facts in the reply")
    return WorkerFacts(
        rpc=str(raw["rpc"]),
        device=str(raw["device"]),
        free_bytes=int(raw["free_bytes"]),
        threads=int(raw["threads"]),
        hearth_version=str(raw["hearth_version"]),
        llama_cpp_version=str(raw["llama_cpp_version"]),
    )
