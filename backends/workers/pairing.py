"""Pairing a main Hearth with a `hearth worker`: the worker prints a code, the main proves it knows the code without
sending it, and gets a token it shows on every later request. Pure: messages in, messages out (the time and where a
request came from are given); ``app`` does the I/O.

One JSON object per line, inside the TLS link of ``backends/workers/secure_link.py``. The main sends ``{"op": "pair",
"version": …, "nonce": …, "proof": HMAC-SHA256(code, "pair:" + nonce + ":" + fingerprint)}``, where fingerprint is
that of the certificate the link showed it: a machine in the middle shows another one, and its proof fails. A worker
of another Hearth or llama.cpp version refuses with the reason, a wrong proof is refused, and a right one gets
``{"token": …, "proof": …}`` (the worker's own proof that it knows the code, which the main checks before it pins the
fingerprint) plus what the worker serves (device, free memory, threads, versions). A code pairs once: after a
pairing, and after a wrong proof, the worker takes a new one, so a code guessed from a captured proof is dead.

Wrong proofs cannot jam pairing: the source that sent one (a local account, or a machine on the network) is refused
without effect for :data:`WRONG_BLOCK_S`, doubled for each further wrong one, so its next tries neither burn codes nor
print new ones while other sources pair as before; and after :data:`PAUSE_AFTER_WRONG` wrong proofs since the owner
last asked for a code, pairing pauses (no code is valid) until the owner asks for a new one.
``{"op": "info", "token": …}`` answers the same facts to a paired main, ``{"op": "rpc", "token": …}`` turns the
connection into llama.cpp's RPC stream once answered ``{"ok": true}``, ``{"op": "sink", "token": …, "bytes": N}``
answered ``{"ready": N}`` takes N bytes and answers ``{"received": N}`` (the main measures the link's bandwidth with
it), and ``{"op": "ping"}`` answers at once (the main measures the round-trip time with it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I to misread
CODE_LENGTH = 8
MAX_SINK_BYTES = 64 << 20
WRONG_BLOCK_S = 2.0
PAUSE_AFTER_WRONG = 5


@dataclass(frozen=True)
class WorkerFacts:
    rpc: str  # llama.cpp's RPC on the worker's loopback: mains reach it through the link (op "rpc")
    device: str
    free_bytes: int
    threads: int
    hearth_version: str
    llama_cpp_version: str
    read_bytes_per_s: float = 0.0  # memory read speed with its threads, measured at its start (0: not measured)


MAX_BRACKETS = 8  # a request is one flat object: deeper nesting is refused before any parser recurses into it


def parse_request(line: bytes) -> dict[str, Any] | str:
    """One request line as an object, or why it is not one (in words for the sender)."""
    if line.count(b"[") + line.count(b"{") > MAX_BRACKETS:
        return "A request is one flat JSON object per line; this one nests too deep."
    try:
        parsed = json.loads(line)
    except (ValueError, RecursionError):
        return "A request is one JSON object per line; this line is not JSON."
    if not isinstance(parsed, dict):
        return f"A request is one JSON object per line, not a JSON {type(parsed).__name__}."
    return parsed


def new_code() -> str:
    """A pairing code as the worker prints it: ABCD-EFGH."""
    raw = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    return f"{raw[:4]}-{raw[4:]}"


def normalise_code(code: str) -> str:
    return "".join(c for c in code.upper() if c.isalnum())


def proof(code: str, nonce: str, fingerprint: str, side: str = "pair") -> str:
    """What the main (``side="pair"``) or the worker (``side="paired"``) shows to prove it knows ``code``, bound to
    the certificate the main saw."""
    message = f"{side}:{nonce}:{fingerprint}".encode()
    return hmac.new(normalise_code(code).encode(), message, hashlib.sha256).hexdigest()


def pair_request(code: str, fingerprint: str, hearth_version: str, llama_cpp_version: str) -> dict[str, str]:
    nonce = secrets.token_hex(16)
    return {
        "op": "pair",
        "version": hearth_version,
        "llama_cpp": llama_cpp_version,
        "nonce": nonce,
        "proof": proof(code, nonce, fingerprint),
    }


def worker_proved(code: str, request: Mapping[str, Any], fingerprint: str, reply: Mapping[str, Any]) -> bool:
    """Whether the worker's reply to ``request`` shows it knows ``code`` too (the main checks this before it pins)."""
    given = reply.get("proof")
    expected = proof(code, str(request["nonce"]), fingerprint, side="paired")
    return isinstance(given, str) and hmac.compare_digest(expected, given)


class WorkerState:
    """The worker's side: its code, its certificate's fingerprint, the tokens of the mains paired with it, and what it
    serves. :attr:`code` changes after each pairing and each wrong proof (the caller prints the new one); it is
    empty while :attr:`paused`, until :meth:`renew_code`."""

    def __init__(self, code: str, fingerprint: str, facts: WorkerFacts, tokens: set[str] | None = None) -> None:
        self.code = code
        self.fingerprint = fingerprint
        self.facts = facts
        self.tokens = set(tokens or ())
        self.paused = False
        self._wrong = 0  # wrong proofs since the owner last asked for a code
        self._blocked: dict[str, tuple[float, int]] = {}  # source -> (refused until, its wrong proofs so far)

    def renew_code(self) -> str:
        """The owner asked for a new code: pairing resumes with it."""
        self.code, self.paused, self._wrong = new_code(), False, 0
        return self.code

    def paired(self, request: Mapping[str, Any]) -> bool:
        token = request.get("token")
        return isinstance(token, str) and token in self.tokens

    def answer(self, request: Mapping[str, Any], source: str = "", now: float = 0.0) -> dict[str, Any]:
        """The reply to one request from ``source`` (who sent it, as far as the caller can tell) at ``now`` (seconds,
        any monotonic clock); a new token is added to :attr:`tokens` (the caller saves them)."""
        op = request.get("op")
        if op == "ping":
            return {"pong": True}
        if op == "pair":
            return self._pair(request, source, now)
        if op in ("info", "rpc", "sink"):
            if not self.paired(request):
                return {"error": "This main Hearth is not paired with this worker.", "remedy": "Pair it again."}
            if op == "sink":
                size = request.get("bytes")
                if not isinstance(size, int) or not 0 < size <= MAX_SINK_BYTES:
                    return {"error": f"A bandwidth test sends 1 byte to {MAX_SINK_BYTES} bytes.", "remedy": ""}
                return {"ready": size}
            return {"facts": asdict(self.facts)} if op == "info" else {"ok": True}
        return {"error": f"Unknown request {op!r}.", "remedy": "Use the same Hearth version on both machines."}

    def _pair(self, request: Mapping[str, Any], source: str, now: float) -> dict[str, Any]:
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
        if self.paused:
            return {
                "error": "Pairing is paused on this worker after several wrong codes.",
                "remedy": "Ask whoever runs it to press Enter in its terminal for a new code, then pair with that one.",
            }
        until, wrong = self._blocked.get(source, (0.0, 0))
        if now < until:
            return {
                "error": "Too many wrong pairing codes from here; this worker takes none for "
                f"{math.ceil(until - now)} s.",
                "remedy": "Wait, then pair with the code the worker printed last.",
            }
        code, self.code = self.code, new_code()  # used, right or wrong
        if not hmac.compare_digest(proof(code, nonce, self.fingerprint), given):
            self._blocked[source] = (now + WRONG_BLOCK_S * 2**wrong, wrong + 1)
            self._wrong += 1
            if self._wrong >= PAUSE_AFTER_WRONG:
                self.code, self.paused = "", True
            if self.paused:
                return {
                    "error": "Wrong or already used pairing code; pairing is now paused on this worker.",
                    "remedy": "Ask whoever runs it to press Enter in its terminal for a new code, then pair with that.",
                }
            return {
                "error": "Wrong or already used pairing code.",
                "remedy": "A code pairs once; the worker has printed a new one (pairing code: …): pair with that "
                f"in {WRONG_BLOCK_S * 2**wrong:.0f} s.",
            }
        token = secrets.token_urlsafe(24)
        self.tokens.add(token)
        return {
            "token": token,
            "proof": proof(code, nonce, self.fingerprint, side="paired"),
            "facts": asdict(self.facts),
        }


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
        read_bytes_per_s=float(raw.get("read_bytes_per_s", 0.0)),
    )
