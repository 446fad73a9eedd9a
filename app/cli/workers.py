"""``hearth workers add|list|remove``: the `hearth worker`s this Hearth splits models across."""

from __future__ import annotations

from app.paths import ensure_data_dir, resolve_data_paths
from app.services.workers import WorkerBook
from app.settings import Settings
from app.terminal_text import for_terminal
from backends.memory import format_bytes
from models.shared.errors import HearthError
from models.shared.wording import format_bits_per_s, format_read_speed

EXIT_OK = 0


def run_workers(
    settings: Settings, action: str, address: str | None, code: str | None, *, measure: bool = False
) -> int:
    book = WorkerBook(ensure_data_dir(resolve_data_paths(settings.home)).workers_file)
    if action == "add":
        if not address or not code:
            raise HearthError("Adding a worker needs its address and code.", "hearth workers add HOST:PORT --code CODE")
        worker = book.add(address, code)
        print(
            f"Paired with the worker at {worker.address}: {for_terminal(worker.facts.device)}, "
            f"{format_bytes(worker.facts.free_bytes)} free, {worker.facts.threads} threads "
            f"({format_read_speed(worker.facts.read_bytes_per_s)}), "
            f"round trip {worker.round_trip_ms:.2f} ms, {format_bits_per_s(worker.bandwidth_bytes_per_s)} through the "
            "encrypted link."
        )
        print("`--backend pipeline` now splits models across the paired workers.")
        return EXIT_OK
    if action == "remove":
        if not address:
            raise HearthError("Removing a worker needs its address.", "hearth workers remove HOST:PORT")
        gone = book.remove(address)
        print(f"Removed the worker at {gone.address}; it is no longer used.")
        return EXIT_OK
    statuses = book.status(measure)
    if not statuses:
        print("No workers are paired. Run `hearth worker` on another machine, then `hearth workers add`.")
        return EXIT_OK
    for status in statuses:
        facts = status.worker.facts
        where = f"{status.worker.address}\t"
        if status.online:
            print(
                f"{where}online\t{for_terminal(facts.device)}\t{format_bytes(facts.free_bytes)} free\t"
                f"{status.round_trip_ms:.2f} ms\t{format_bits_per_s(status.bandwidth_bytes_per_s or 0.0)}\t"
                f"Hearth {facts.hearth_version}, llama.cpp {facts.llama_cpp_version}\t"
                f"{format_read_speed(facts.read_bytes_per_s)}"
            )
        else:
            print(f"{where}offline\t{for_terminal(status.problem)}")
    return EXIT_OK
