"""The workers this Hearth has paired with (``workers.json`` in the data folder, owner-only): added with the code a
worker printed (its certificate pinned then), listed with whether each answers now and how far away it is, removed;
and the links the pipeline backend reaches them through."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from app.paths import write_private_text
from backends.base import WorkerLink
from backends.workers.cost import LinkFacts
from backends.workers.pairing import WorkerFacts, facts_from, pair_request, worker_proved
from backends.workers.rpc import parse_endpoint
from models.shared.errors import HearthError


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
    fingerprint: str  # of the certificate the worker showed when paired: any other is refused
    facts: WorkerFacts
    round_trip_ms: float
    bandwidth_bytes_per_s: float = 0.0  # through the link, measured at pairing (0: not measured)

    @property
    def link(self) -> WorkerLink:
        return WorkerLink(self.address, self.fingerprint, self.token)

    @property
    def link_facts(self) -> LinkFacts:
        """What pairing measured of the link, for the planner."""
        facts = self.facts
        return LinkFacts(
            self.round_trip_ms,
            self.bandwidth_bytes_per_s,
            self.address,
            facts.device,
            facts.free_bytes,
            facts.read_bytes_per_s,
        )


@dataclass(frozen=True)
class WorkerStatus:
    worker: PairedWorker
    online: bool
    round_trip_ms: float | None
    problem: str = ""
    bandwidth_bytes_per_s: float | None = None


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
                        str(item["fingerprint"]),
                        facts_from({"facts": item["facts"]}),
                        float(item["round_trip_ms"]),
                        float(item.get("bandwidth_bytes_per_s", 0.0)),
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue  # a damaged entry: the others still work; `hearth workers add` writes it again
        return found

    def add(self, address: str, code: str) -> PairedWorker:

        from app.worker_control import WorkerUnavailable, ask, bandwidth_bytes_per_s, round_trip_ms
        from backends.workers.secure_link import connect

        where = parse_endpoint(address)
        try:
            _, seen = connect(where.host, where.port, pin=None)  # the certificate the proof is bound to
        except OSError as exc:
            raise WorkerUnavailable(
                f"The worker at {where} does not answer ({exc.strerror or exc}).",
                "Check that `hearth worker` runs there and that the address is right.",
                page_remedy="Check that Hearth's worker runs on that computer and that the address is the one it "
                "printed.",
            ) from None
        request = pair_request(code, seen, *local_versions())
        reply, _ = ask((where.host, where.port), request, pin=seen)
        if "error" in reply:
            raise WorkerRefused(f"The worker at {where} refused: {reply['error']}", str(reply.get("remedy", "")))
        if not worker_proved(code, request, seen, reply):
            raise WorkerRefused(
                f"{where} did not prove it knows the pairing code: it is not the worker that printed it.",
                "Check the address; pair only over a network you trust.",
            )
        distance = round_trip_ms((where.host, where.port), seen)
        speed = bandwidth_bytes_per_s((where.host, where.port), seen, str(reply["token"]))
        worker = PairedWorker(str(where), str(reply["token"]), seen, facts_from(reply), distance, speed)
        self._save([*(w for w in self.paired() if w.address != worker.address), worker])
        return worker

    def remove(self, address: str) -> PairedWorker:
        key = str(parse_endpoint(address))
        known = self.paired()
        gone = next((w for w in known if w.address == key), None)
        if gone is None:
            raise WorkerRefused(
                f"No worker at {key} is paired with this Hearth.",
                "`hearth workers list` shows them.",
                page_remedy="The Paired worker list shows them.",
            )
        self._save([w for w in known if w.address != key])
        return gone

    def status(self, measure: bool = False) -> list[WorkerStatus]:
        """Each paired worker, asked now: its facts (free memory changes) and its round trip; with ``measure``, its
        bandwidth too (a 2 MiB test each, so not on every look), else the last one measured. What was learnt is
        written back for the pipeline planner, free memory only from a worker that serves no main at the moment
        (while it holds a model's layers, their memory is not free, yet it is for the next load of that model)."""
        from app.worker_control import ask, bandwidth_bytes_per_s, round_trip_ms

        statuses = []
        learnt: dict[str, PairedWorker] = {}
        for worker in self.paired():
            where = parse_endpoint(worker.address)
            try:
                reply, _ = ask((where.host, where.port), {"op": "info", "token": worker.token}, worker.fingerprint)
                if "error" in reply:
                    statuses.append(WorkerStatus(worker, False, None, str(reply["error"])))
                    continue
                address = (where.host, where.port)
                trip = round_trip_ms(address, worker.fingerprint)
                speed = (
                    bandwidth_bytes_per_s(address, worker.fingerprint, worker.token)
                    if measure
                    else worker.bandwidth_bytes_per_s
                )
                fresh = dataclasses.replace(worker, facts=facts_from(reply))
                statuses.append(WorkerStatus(fresh, True, trip, bandwidth_bytes_per_s=speed or None))
            except (HearthError, OSError) as exc:
                statuses.append(WorkerStatus(worker, False, None, getattr(exc, "message", str(exc))))
                continue
            kept = fresh if not reply.get("serving") else dataclasses.replace(fresh, facts=worker.facts)
            learnt[worker.address] = dataclasses.replace(kept, round_trip_ms=trip, bandwidth_bytes_per_s=speed)
        if learnt:
            self._update(learnt)
        return statuses

    def _update(self, learnt: dict[str, PairedWorker]) -> None:
        """The entries of ``learnt`` (by address) replaced, those still paired with the same token (asking them
        takes a while: one may have been removed or paired again meanwhile)."""
        known = self.paired()
        self._save([learnt.get(w.address, w) if learnt.get(w.address, w).token == w.token else w for w in known])

    def chosen(self, chosen: Sequence[str] = ()) -> tuple[PairedWorker, ...]:
        """The paired workers at the ``chosen`` control addresses, or all of them; refused for one not paired."""
        paired = self.paired()
        if not chosen:
            return tuple(paired)
        by_address = {w.address: w for w in paired}
        found = []
        for address in chosen:
            key = str(parse_endpoint(address))
            if key not in by_address:
                raise WorkerRefused(
                    f"The worker at {key} is not paired with this Hearth.",
                    f"Pair it first: hearth workers add {key} --code CODE (the code it printed).",
                    page_remedy="Pair it first under Workers: its address and the code it printed.",
                )
            found.append(by_address[key])
        return tuple(found)

    def _save(self, workers: Sequence[PairedWorker]) -> None:
        write_private_text(self._path, json.dumps([asdict(w) for w in workers], indent=2))
