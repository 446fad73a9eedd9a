"""The workers this Hearth has paired with (``workers.json`` in the data folder, owner-only): added with the code a
worker printed, listed with whether each answers now and how far away it is, removed; and the llama.cpp RPC
addresses the pipeline backend puts layers on."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from app.errors import HearthError
from app.paths import write_private_text
from backends.pairing import WorkerFacts, facts_from, pair_request
from backends.rpc import parse_endpoint


def local_versions() -> tuple[str, str]:
    """This Hearth's version and its llama-cpp-python's: a worker and its main must run the same of both."""
    import importlib.metadata

    from app import __version__

    return __version__, importlib.metadata.version("llama_cpp_python")


class WorkerRefused(HearthError):
    """A worker that refused to pair (wrong code, another version), or one this Hearth does not know."""


@dataclass(frozen=True)
class PairedWorker:
    address: str  # the worker's control address, as given to `hearth workers add`
    token: str
    facts: WorkerFacts
    round_trip_ms: float


@dataclass(frozen=True)
class WorkerStatus:
    worker: PairedWorker
    online: bool
    round_trip_ms: float | None
    problem: str = ""


class WorkerBook:
    def __init__(self, path: Path) -> None:
        self._path = path

    def paired(self) -> list[PairedWorker]:
        try:
            raw = json.loads(self._path.read_text())
        except (OSError, ValueError):
            return []
        found = []
        for item in raw if isinstance(raw, list) else []:
            try:
                found.append(
                    PairedWorker(
                        str(item["address"]),
                        str(item["token"]),
                        facts_from({"facts": item["facts"]}),
                        float(item["round_trip_ms"]),
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue  # a damaged entry: the others still work; `hearth workers add` writes it again
        return found

    def add(self, address: str, code: str) -> PairedWorker:
        from app.worker_control import ask, round_trip_ms

        where = parse_endpoint(address)
        reply = ask((where.host, where.port), pair_request(code, *local_versions()))
        if "error" in reply:
            raise WorkerRefused(f"The worker at {where} refused: {reply['error']}", str(reply.get("remedy", "")))
        distance = round_trip_ms((where.host, where.port))
        worker = PairedWorker(str(where), str(reply["token"]), facts_from(reply), distance)
        self._save([*(w for w in self.paired() if w.address != worker.address), worker])
        return worker

    def remove(self, address: str) -> PairedWorker:
        key = str(parse_endpoint(address))
        known = self.paired()
        gone = next((w for w in known if w.address == key), None)
        if gone is None:
            raise WorkerRefused(f"No worker at {key} is paired with this Hearth.", "`hearth workers list` shows them.")
        self._save([w for w in known if w.address != key])
        return gone

    def status(self) -> list[WorkerStatus]:
        """Each paired worker, asked now (its facts refreshed: free memory changes)."""
        from app.worker_control import WorkerUnavailable, ask, round_trip_ms

        statuses = []
        for worker in self.paired():
            where = parse_endpoint(worker.address)
            try:
                reply = ask((where.host, where.port), {"op": "info", "token": worker.token})
                if "error" in reply:
                    statuses.append(WorkerStatus(worker, False, None, str(reply["error"])))
                    continue
                fresh = PairedWorker(worker.address, worker.token, facts_from(reply), worker.round_trip_ms)
                statuses.append(WorkerStatus(fresh, True, round_trip_ms((where.host, where.port))))
            except (WorkerUnavailable, OSError) as exc:
                statuses.append(WorkerStatus(worker, False, None, getattr(exc, "message", str(exc))))
        return statuses

    def rpc_addresses(self, chosen: Sequence[str] = ()) -> tuple[str, ...]:
        """The RPC addresses of ``chosen`` paired workers (their control addresses), or of all of them."""
        paired = self.paired()
        if not chosen:
            return tuple(w.facts.rpc for w in paired)
        by_address = {w.address: w for w in paired}
        addresses = []
        for address in chosen:
            key = str(parse_endpoint(address))
            if key not in by_address:
                raise WorkerRefused(
                    f"The worker at {key} is not paired with this Hearth.",
                    f"Pair it first: hearth workers add {key} --code CODE (the code it printed).",
                )
            addresses.append(by_address[key].facts.rpc)
        return tuple(addresses)

    def _save(self, workers: Sequence[PairedWorker]) -> None:
        write_private_text(self._path, json.dumps([asdict(w) for w in workers], indent=2))
