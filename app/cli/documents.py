"""`hearth ingest` and `hearth collections`: documents from the terminal."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from app.ingest_text import progress_words
from app.paths import ensure_data_dir, resolve_data_paths
from app.services.container import enforce_offline
from app.services.library.documents import DocumentServices, build_documents
from app.settings import Settings
from app.terminal_text import for_terminal, for_terminal_lines
from models.shared.errors import HearthError
from models.shared.wording import format_eta, plural, shorten
from rag.ingest import FileOutcome, IngestProgress

EXIT_OK = 0
EXIT_INTERRUPTED = 130  # the shell's code for a command stopped with Ctrl+C
EXCERPT_CHARS = 240
# In a log (stderr not a terminal), the least time between two progress lines about the same step of a file.
LOG_PROGRESS_S = 5.0


def _documents(settings: Settings) -> DocumentServices:
    enforce_offline()
    return build_documents(settings, ensure_data_dir(resolve_data_paths(settings.home)))


def run_ingest(settings: Settings, paths: list[Path], collection: str, read_ahead: bool = False) -> int:
    if read_ahead:
        _check_read_ahead(settings)
    documents = _documents(settings)
    indexed: list[str] = []
    progress = IngestProgressPrinter(sys.stderr.isatty())
    counts = {"indexed": 0, "unchanged": 0, "skipped": 0, "removed": 0}
    chunks = 0
    started = time.perf_counter()
    try:
        info = documents.ingestor.open_collection(collection)
        print(f"Adding to collection {for_terminal(repr(info.name))}", file=sys.stderr)
        for event in documents.ingestor.ingest(paths, info.name):
            if isinstance(event, IngestProgress):
                progress.show(event)
                continue
            counts[event.outcome] += 1
            chunks += event.chunks if event.outcome == "indexed" else 0
            indexed += [event.path] if event.outcome == "indexed" else []
            progress.clear()
            print(describe_outcome(event), flush=True)
    except KeyboardInterrupt:
        progress.clear()
        print(
            f"Stopped after {counts['indexed']} new files. What was indexed is kept (a file stopped part-way was not "
            "added); run the same command again to finish.",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    finally:
        documents.close()
    elapsed = time.perf_counter() - started
    summary = ", ".join(f"{n} {name}" for name, n in counts.items())
    print(f"{summary} — {chunks} new passages in {elapsed:.1f} s", file=sys.stderr)
    if read_ahead and indexed:
        return _read_ahead(settings, collection, indexed)
    return EXIT_OK


def _check_read_ahead(settings: Settings) -> None:
    """Refuses reading ahead, before anything is indexed, where the passages read would not be kept."""
    if not settings.rag.keep_passages:
        raise HearthError(
            "Passages read ahead would not be kept: keeping passages is off.",
            "Set HEARTH_RAG__KEEP_PASSAGES=true, then run the same command again.",
        )


def _read_ahead(settings: Settings, collection: str, indexed: list[str]) -> int:
    """Read the passages of the files just indexed with the chat model once, so that their caches are kept."""
    from app.cli.commands import load_model
    from app.services.answering.warming import passages_of, planned, room_tokens, warm
    from app.services.container import build_services
    from backends.base import CancelToken

    services = build_services(settings)
    cancel = CancelToken()
    done = kept_before = 0
    try:
        passages = passages_of(services.documents.get(), collection, indexed)
        load_model(services)
        assert services.runtime.model is not None
        plan = planned(services.runtime, passages, room_tokens(services.runtime.model, settings))
        if len(plan) < len(passages):
            print(
                f"Reading ahead the first {len(plan)} of {plural(len(passages), 'passage')}: the rest would not fit "
                "in the room kept caches have (HEARTH_BACKEND__PASSAGE_CACHE_MB).",
                file=sys.stderr,
            )
        params = services.generation_params(collection=collection)
        for step in warm(services.runtime, plan, params, cancel):
            done, kept_before = step.done, step.kept_before
            line = f"Reading ahead: {step.done} of {plural(step.total, 'passage')} · {format_eta(step.eta_s)}"
            print(line, file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        cancel.cancel()
        print(f"Stopped after {plural(done, 'passage')}; those read are kept.", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        services.close()
    already = f" ({kept_before} of them kept already)" if kept_before else ""
    print(
        f"Read {plural(done, 'passage')} ahead{already}: a question that finds them joins their kept caches instead "
        "of reading them.",
        file=sys.stderr,
    )
    return EXIT_OK


class IngestProgressPrinter:
    """Progress on stderr: redrawn in place on a terminal; in a log (not a terminal), a line when a file's step
    changes and every ``LOG_PROGRESS_S`` within a long one."""

    def __init__(self, interactive: bool) -> None:
        self._interactive = interactive
        self._drawn = False
        self._printed_at = 0.0
        self._printed_step: tuple[int, str] | None = None

    def show(self, event: IngestProgress) -> None:
        if not event.current:
            return
        line = " · ".join(
            [f"[{event.position}/{event.files_total}] {for_terminal(event.current)}", *progress_words(event)]
        )
        if self._interactive:
            print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
            self._drawn = True
            return
        step = (event.position, event.step.phase if event.step else "")
        now = time.monotonic()
        if step != self._printed_step or now - self._printed_at >= LOG_PROGRESS_S:
            self._printed_step, self._printed_at = step, now
            print(line, file=sys.stderr, flush=True)

    def clear(self) -> None:
        if self._drawn:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
            self._drawn = False


def describe_outcome(event: FileOutcome) -> str:
    """One line per file; names and reasons (which quote names) come from outside and are escaped."""
    name = for_terminal(Path(event.path).name)
    reason = for_terminal(event.reason)
    if event.outcome == "indexed":
        return f"indexed    {name} ({plural(event.chunks, 'passage')})"
    if event.outcome == "unchanged":
        return f"unchanged  {name} ({plural(event.chunks, 'passage')})"
    if event.outcome == "removed":
        return f"removed    {name} ({reason})"
    return f"skipped    {name}: {reason}"


def run_collections(
    settings: Settings, name: str | None, delete: bool, remove_file: Path | None, copy_to: str | None = None
) -> int:
    documents = _documents(settings)
    try:
        if copy_to is not None:
            if name is None:
                raise HearthError("Name the collection to copy.", "hearth collections NAME --copy-to-server")
            return _copy(documents, name, copy_to == "server")
        if name is None:
            summaries = documents.summaries()
            if not summaries:
                print("No collections yet. Add documents with: hearth ingest PATH --collection NAME")
            for summary in summaries:
                print(
                    f"{for_terminal(summary.info.name)}: {plural(summary.indexed_files, 'file')}, "
                    f"{plural(summary.chunks, 'passage')}"
                    + (f", {summary.skipped_files} skipped" if summary.skipped_files else "")
                    + f" (embedder {for_terminal(summary.info.embedder)})"
                    + (f" — on the Chroma server {for_terminal(summary.info.server)}" if summary.info.server else "")
                )
            return EXIT_OK
        if delete:
            documents.delete_collection(name)
            print(f"Deleted collection {for_terminal(repr(name))}. The original files were not touched.")
            return EXIT_OK
        if remove_file is not None:
            documents.remove_file(name, str(remove_file.expanduser().resolve()))
            print(
                f"Removed {for_terminal(remove_file.name)} from {for_terminal(repr(name))}. "
                "The file itself was not touched."
            )
            return EXIT_OK
        for record in documents.files(name):
            state = plural(record.chunks, "passage") if record.status == "indexed" else f"skipped: {record.reason}"
            print(f"{for_terminal(record.path)}\t{for_terminal(state)}")
        return EXIT_OK
    finally:
        documents.close()


def _copy(documents: DocumentServices, name: str, to_server: bool) -> int:
    def show(done: int, total: int) -> None:
        print(f"copied {done:,} of {total:,} passages", file=sys.stderr, flush=True)

    copied = documents.copy_collection(name, to_server, show)
    if to_server:
        print(
            f"Copied {for_terminal(repr(copied.name))} to the Chroma server {for_terminal(copied.server or '')}. The "
            "data folder's copy is still the one used: delete it (hearth collections NAME --delete) to use the "
            "server's."
        )
    else:
        print(
            f"Copied {for_terminal(repr(copied.name))} into the data folder; it is the one used now. The server's "
            "copy is still there."
        )
    return EXIT_OK


def run_ask(
    settings: Settings, question: str, collection: str, top_k: int, adapter: str | None = None, scale: float = 1.0
) -> int:
    from app.cli.commands import load_model
    from app.services.answering.ask import AskFinished, AskStarted, ask
    from app.services.answering.documents_turn import FinalAnswer
    from app.services.container import build_services
    from backends.base import TextDelta, Usage

    services = build_services(settings)
    documents = services.documents.get()
    try:
        documents.manifest.get(collection)  # a clear error before the model loads
        params = services.generation_params(adapter, scale, collection=collection)
        load_model(services)
        print("[embedding model] loading", file=sys.stderr, flush=True)
        _ = documents.embedder.dimension  # load it now, so the timings below are the question's own
        started: AskStarted | None = None
        usage: Usage | None = None
        final: FinalAnswer | None = None
        for event in ask(documents, services.runtime, collection, question, params, top_k):
            if isinstance(event, AskStarted):
                started = event
            elif isinstance(event, TextDelta):
                sys.stdout.write(for_terminal_lines(event.text))  # passages can steer the answer into escapes
                sys.stdout.flush()
            elif isinstance(event, Usage):
                usage = event
            elif isinstance(event, AskFinished):
                final = event.answer
        print()
        # The answer is already on the terminal: a name filled in for an answer that pointed at a passage, and a
        # citation on a passage that does not say it, are told here.
        for note in final.notes if final is not None else ():
            print(for_terminal(note))
        if started is not None:
            print("\nSources:" if started.found.sources else "\nNo passage in the collection matched the question.")
            for source in started.found.sources:
                excerpt = for_terminal(shorten(source.text, EXCERPT_CHARS))
                print(f"[{source.number}] {for_terminal(source.label)}\n    {excerpt}")
        if started is not None and usage is not None:
            print(
                f"[embed {started.found.embed_ms:.0f} ms · retrieve {started.found.retrieve_ms:.0f} ms · "
                f"prompt {usage.prompt_tokens} tokens, first token after {usage.time_to_first_token_ms:.0f} ms · "
                f"{usage.decode_tokens_per_s:.1f} tokens/s]",
                file=sys.stderr,
            )
    finally:
        services.close()
    return EXIT_OK


def run_eval_retrieval(
    settings: Settings, questions_path: Path, collection: str, top_k: int, part: str | None = None
) -> int:
    from app.cli.eval import split_part
    from rag.evaluation import Retrieved, evaluate, read_questions, unknown_gold_files

    questions = read_questions(questions_path)  # a bad file is refused before anything is loaded
    if part is not None:
        questions = split_part(questions, questions_path, part)
    documents = _documents(settings)
    try:
        info = documents.manifest.get(collection)
        indexed = {Path(path).name for path, record in documents.manifest.files(info.name).items()}
        for name, positions in unknown_gold_files(questions, indexed).items():
            which = ", ".join(str(n) for n in positions[:10]) + (", …" if len(positions) > 10 else "")
            print(
                f"warning: {for_terminal(repr(name))} is not in collection {for_terminal(repr(info.name))}: "
                f"{plural(len(positions), 'question')} ({which}) cannot be found; check the name or add the file",
                file=sys.stderr,
            )

        def search(question: str) -> list[Retrieved]:
            if documents.excerpts:  # what the model would be given: the best sentences of more passages
                from app.services.answering.sources import excerpts_of
                from rag.excerpts import CANDIDATES
                from rag.prompt import Candidate

                ranked = documents.retriever.search(info.name, question, top_k=max(top_k, CANDIDATES)).passages
                given = [Candidate(p.chunk.path, p.chunk.page, p.chunk.section, p.chunk.text) for p in ranked]
                chosen = excerpts_of(documents.embedder, question, given, top_k, documents.embedder.count_tokens)
                return [Retrieved(Path(c.path).name, c.page, c.text) for c in chosen]
            found = documents.retriever.search(info.name, question, top_k=top_k)
            return [Retrieved(Path(p.chunk.path).name, p.chunk.page, p.chunk.text) for p in found.passages]

        # Excerpts of up to MORE_PASSAGES more passages fill the room of top_k whole ones.
        from rag.excerpts import MORE_PASSAGES

        report = evaluate(questions, search, top_k + MORE_PASSAGES if documents.excerpts else top_k)
    finally:
        documents.close()
    for result in report.results:
        if result.rank != 1:
            got = ", ".join(f"{r.file_name}" + (f" p{r.page}" if r.page else "") for r in result.retrieved[:3])
            where = f"rank {result.rank}" if result.rank else f"not in top {top_k}"
            print(f"miss ({where}): {for_terminal(repr(result.question.question))} -> {for_terminal(got)}")
    print(f"{len(report.results)} questions, collection {for_terminal(repr(info.name))}, top {top_k}")
    print(
        f"search time per question: median {report.latency_percentile_ms(0.5):.0f} ms, "
        f"p90 {report.latency_percentile_ms(0.9):.0f} ms (the first includes building the keyword index)"
    )
    print(f"hit@1 {report.hit_at_1:.3f}   hit@{top_k} {report.hit_at_k:.3f}   MRR {report.mrr:.3f}")
    with_answers = [r for r in report.results if r.question.expected]
    if with_answers:
        from rag.answer_eval import holds_expected

        lacking = [
            r for r in with_answers if not holds_expected("\n".join(p.text for p in r.retrieved), r.question.expected)
        ]
        for result in lacking:
            got = ", ".join(f"{r.file_name}" + (f" p{r.page}" if r.page else "") for r in result.retrieved[:3])
            print(f"answer not in the passages: {for_terminal(repr(result.question.question))} -> {for_terminal(got)}")
        held = len(with_answers) - len(lacking)
        given = f"excerpts in the room of {top_k} passages" if documents.excerpts else f"{top_k} passages"
        print(f"the {given} hold the answer (every expected string) for {held} of {len(with_answers)}")
    return EXIT_OK
