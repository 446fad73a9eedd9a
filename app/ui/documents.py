"""The Documents tab: collections, uploads with progress and cancel, each file's status. Wiring only: the work
is in ``app.services`` and the text comes from ``app.ui.document_text``."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from app.services.container import Services
from app.services.library.documents import DocumentServices
from app.services.library.uploads import add_uploads
from app.ui import cancel_button
from app.ui.chroma_server_section import ServerSection, ServerUi, build_server_section, wire_server_section
from app.ui.document_text import (
    TABLE_HEADERS,
    cancelling_line,
    collection_summary,
    file_rows,
    progress_line,
    read_ahead_line,
    upload_report,
)
from app.ui.errors import as_gradio_error
from app.ui.page_uploads import PageUploads
from app.ui.render import upload_limit_note
from backends.base import CancelSlot, CancelToken
from models.shared.database import disk_full, is_disk_full
from models.shared.errors import HearthError
from rag.ingest import FileOutcome, IngestProgress

# How often the progress line is redrawn during an ingestion.
PROGRESS_INTERVAL_S = 0.3
NO_COLLECTION = ""
NO_COLLECTION_YET = (
    "There is no collection yet to add these files to: name one above and press **Create**. Files in the box stay "
    "there and are added to it then (a folder: pick it again)."
)
# Smaller embedding batches than the CLI's: a chat answer that starts mid-batch shares the CPU for at most ~2 s.
PAGE_FLUSH_CHUNKS = 64


class DocumentsPanel:
    def __init__(self, services: Services, uploads: PageUploads) -> None:
        self.services = services
        self.uploads = uploads
        self._current = CancelSlot()
        # The ingestion now running (one at a time: the page queues them) and its latest progress, for Cancel's
        # immediate answer.
        self._running = False
        self._last: IngestProgress | None = None

    def docs(self) -> DocumentServices:
        try:
            return self.services.documents.get()
        except HearthError as exc:
            raise as_gradio_error(exc) from exc

    # --- what the tab shows -------------------------------------------------------------------------------------

    def names(self) -> list[str]:
        try:
            return [info.name for info in self.docs().manifest.collections()]
        except HearthError as exc:  # a damaged index: the dialog says so; chat without documents goes on
            raise as_gradio_error(exc) from exc

    def chat_choices(self, names: list[str] | None = None) -> list[tuple[str, str]]:
        listed = self.names() if names is None else names
        return [("None (plain chat)", NO_COLLECTION), *((name, name) for name in listed)]

    def view(self, collection: str | None, names: list[str] | None = None) -> tuple[Any, ...]:
        """Collection picker, file table, the remove-file picker, the summary line, and the collection's actions
        (shown only when there is a collection to act on), for ``collection``."""
        names = self.names() if names is None else names
        selected = collection if collection in names else (names[0] if names else None)
        records = self.docs().files(selected) if selected else []
        info = self.docs().manifest.get(selected) if selected else None
        owned = self.docs().uploads_folder(info) if info else None
        return (
            gr.update(choices=names, value=selected),
            file_rows(records, owned),
            gr.update(choices=[(Path(r.path).name, r.path) for r in records], value=None),
            collection_summary(selected, records, info.server if info else None),
            gr.update(visible=selected is not None),
        )

    def first_view(self) -> tuple[Any, ...]:
        return self.refresh(None, NO_COLLECTION)

    def refresh(self, collection: str | None, chat_collection: str | None) -> tuple[Any, ...]:
        names = self.names()
        choices = self.chat_choices(names)
        keep = chat_collection if chat_collection in {value for _, value in choices} else NO_COLLECTION
        return (*self.view(collection, names), gr.update(choices=choices, value=keep))

    # --- changes ------------------------------------------------------------------------------------------------

    def create(self, name: str, chat_collection: str | None) -> tuple[Any, ...]:
        try:
            info = self.docs().ingestor.open_collection(name)
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        gr.Info(f"Collection {info.name!r} is ready. Add files to it below.", duration=4)
        return (*self.refresh(info.name, chat_collection), "")

    def delete(self, collection: str | None, chat_collection: str | None) -> tuple[Any, ...]:
        if not collection:
            raise gr.Error("Pick a collection to delete first.", title="Hearth", print_exception=False)
        try:
            info = self.docs().delete_collection(collection)
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        gr.Info(
            f"Deleted collection {info.name!r}. Files on your disk that were added by path were not touched.",
            duration=6,
        )
        return self.refresh(None, chat_collection)

    def remove_file(self, collection: str | None, path: str | None) -> tuple[Any, ...]:
        if not collection or not path:
            raise gr.Error("Pick a file to remove first.", title="Hearth", print_exception=False)
        try:
            info = self.docs().remove_file(collection, path)
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        gr.Info(f"Removed {Path(path).name} from {info.name!r}.", duration=4)
        return self.view(info.name)

    def cancel(self) -> Any:
        """Cancel the ingestion now running (it stops within a second or so, even mid-file); the button says so at
        once. The progress line is left to the ingestion's own stream, which shows "Cancelling…" on its next beat
        and the report when it ends: this reply travels apart from that stream, and a late one would otherwise
        cover the report."""
        self._current.cancel()
        return cancel_button.pressed() if self._running else cancel_button.hidden()

    def add_files(self, collection: str | None, uploaded: Sequence[str] | None) -> Iterator[tuple[Any, ...]]:
        """Copy the uploads into the data directory and index them, yielding the progress line as it goes and the
        file table each time a file is done.

        Outputs: progress line, file table, remove-file picker, summary line, cancel button, the upload box."""
        if not uploaded:
            return
        try:
            files = self.uploads.checked(uploaded)
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        if not collection:
            # Not an error dialog, and the files stay in the box: creating the collection adds them (add_kept).
            yield NO_COLLECTION_YET, gr.update(), gr.update(), gr.update(), gr.update(), gr.update()
            return
        cancel = self._current.start()
        self._running, self._last = True, None
        try:
            yield from self._index(collection, files, cancel)
        finally:
            self._running = False

    def add_kept(self, collection: str | None, uploaded: Sequence[str] | None) -> Iterator[tuple[Any, ...]]:
        """After a collection is created: the files left in the upload box while there was none are added to it."""
        if not uploaded or not collection:
            yield tuple(gr.skip() for _ in range(6))  # a generator that yields nothing would empty its outputs
            return
        yield from self.add_files(collection, uploaded)

    def _index(self, collection: str, uploaded: Sequence[Path], cancel: CancelToken) -> Iterator[tuple[Any, ...]]:
        idle = (gr.update(), gr.update(), gr.update())
        button = cancel_button.ready("Cancel")
        yield "Preparing the embedding model…", *idle, button, gr.update()
        docs = self.docs()
        outcomes: list[FileOutcome] = []
        try:
            info = docs.ingestor.open_collection(collection)
            last, changed = 0.0, False
            sharing = self.services.cpu  # the chat model and the embedder each get cores of their own
            events = add_uploads(
                docs, info.name, uploaded, cancel, sharing.before_batch, flush_chunks=PAGE_FLUSH_CHUNKS
            )
            with sharing.indexing():
                for event in events:
                    if isinstance(event, FileOutcome):
                        outcomes.append(event)
                        changed = changed or event.outcome != "unchanged"
                    else:
                        self._last = event
                    if time.monotonic() - last < PROGRESS_INTERVAL_S:
                        continue
                    last = time.monotonic()
                    line = cancelling_line(self._last) if cancel.cancelled else self._line()
                    if changed:  # rows appear as files are done, not all at the end
                        changed = False
                        _, table, picker, summary, _actions = self.view(info.name)
                        yield line, table, picker, summary, gr.update(), gr.update()
                    else:
                        yield line, *idle, gr.update(), gr.update()
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        except OSError as exc:
            if is_disk_full(exc):
                raise as_gradio_error(disk_full("copy of the upload", docs.uploads_dir)) from exc
            raise gr.Error(
                f"Could not keep a copy of the upload: {exc.strerror}. Check free disk space.",
                title="Hearth",
                print_exception=False,
            ) from exc
        _, table, picker, summary, _actions = self.view(info.name)
        report = upload_report(outcomes, len(uploaded), cancelled=cancel.cancelled)
        indexed = [o.path for o in outcomes if o.outcome == "indexed"]
        if indexed and not cancel.cancelled and self._reads_ahead():
            yield report, table, picker, summary, gr.update(), None
            for line in self._read_ahead(info.name, indexed, cancel):
                report_and_line = f"{report}\n\n{line}"
                yield report_and_line, *idle, gr.update(), gr.update()
            report = report_and_line  # the last line stays under the report
        yield report, table, picker, summary, cancel_button.hidden(), None

    def _reads_ahead(self) -> bool:
        """Whether the page reads new files' passages ahead (``rag.read_ahead``, where they would be kept, with the
        model loaded, and not on battery)."""
        from app.services.answering.warming import on_battery

        rag = self.services.settings.rag
        if not (rag.read_ahead and rag.keep_passages):
            return False
        return self.services.runtime.model is not None and not on_battery()

    def _read_ahead(self, collection: str, indexed: Sequence[str], cancel: CancelToken) -> Iterator[str]:
        """Read the passages of the files just indexed once with the chat model, so that questions join their kept
        caches; a progress line after each (Cancel stops it; what was read stays kept)."""
        from app.services.answering.warming import passages_of, planned, room_tokens, warm

        runtime, model = self.services.runtime, self.services.runtime.model
        if model is None:
            return
        plan = planned(
            runtime, passages_of(self.docs(), collection, indexed), room_tokens(model, self.services.settings)
        )
        params = self.services.generation_params(collection=collection)
        done = 0
        try:
            for step in warm(runtime, plan, params, cancel):
                done = step.done
                yield read_ahead_line(step.done, step.total, step.eta_s)
        except HearthError as exc:  # the files are indexed all the same: said under the report, not as an error
            yield f"The new passages were not read ahead: {exc.message}"
            return
        if cancel.cancelled:
            yield f"Stopped reading ahead after {done} of {len(plan)} passages; those read are kept."

    def _line(self) -> str:
        return progress_line(self._last) if self._last is not None else "Starting…"


@dataclass
class DocumentsUi:
    collection: Any
    new_name: Any
    create: Any
    summary: Any
    upload: Any
    folder_upload: Any
    progress: Any
    cancel: Any
    table: Any
    actions: Any
    file_picker: Any
    remove: Any
    delete: Any
    confirm_row: Any
    confirm: Any
    keep: Any
    server: ServerUi

    @property
    def view(self) -> list[Any]:
        """What showing a collection sets: its picker, its files, the file picker, its summary and its actions."""
        return [self.collection, self.table, self.file_picker, self.summary, self.actions]


def build_documents_tab(max_file_mb: int) -> DocumentsUi:
    with gr.Tab("Documents", id="documents-tab", elem_id="documents-tab"):
        gr.Markdown(
            "A **collection** is a set of your files that Hearth can answer from. Files are read, split "
            "into passages and indexed on this computer; pick the collection above the chat to ask "
            "about them."
        )
        with gr.Row(equal_height=True):
            collection = gr.Dropdown(
                choices=[], label="Collection", scale=3, elem_id="collection", interactive=True, allow_custom_value=True
            )
            new_name = gr.Textbox(
                label="New collection", placeholder="for example: work notes", scale=3, elem_id="new-name"
            )
            create_button = gr.Button("Create", scale=1, elem_id="create-collection")
        summary = gr.Markdown("", elem_id="collection-summary")
        with gr.Row(equal_height=True):
            upload = gr.File(
                label=f"Add files (PDF, Word, HTML, Markdown, text, CSV) up to {max_file_mb} MB each",
                file_count="multiple",
                type="filepath",
                scale=4,
                elem_id="upload",
                height=140,
            )
            folder_upload = gr.UploadButton(
                "Add a folder", file_count="directory", scale=1, elem_id="upload-folder", size="md"
            )
        gr.Markdown(upload_limit_note(max_file_mb), elem_id="upload-limit")
        # Not equal heights: the button keeps its size and place while the line beside it grows and shrinks,
        # so a press lands on it.
        with gr.Row(equal_height=False):
            progress = gr.Markdown("", elem_id="ingest-progress")
            cancel = gr.Button(
                "Cancel", variant="stop", size="sm", visible=False, elem_id="cancel", scale=0, min_width=100
            )
        table = gr.Dataframe(
            headers=TABLE_HEADERS,
            datatype=["str", "str", "number", "str"],
            interactive=False,
            wrap=True,
            elem_id="files",
            label="Files",
        )
        actions, file_picker, remove, delete = _collection_actions()
        with gr.Row(visible=False) as confirm_row:
            gr.Markdown("Delete the collection and its index? Files you added by path stay on disk.")
            confirm = gr.Button("Yes, delete it", size="sm", variant="stop", elem_id="confirm-delete-collection")
            keep = gr.Button("Keep it", size="sm", elem_id="keep-collection")
        server = build_server_section()
    return DocumentsUi(
        collection, new_name, create_button, summary, upload, folder_upload, progress, cancel, table, actions,
        file_picker, remove, delete, confirm_row, confirm, keep, server,
    )  # fmt: skip


def _collection_actions() -> tuple[Any, Any, Any, Any]:
    # Shown only with a collection to act on.
    with gr.Column(visible=False, elem_id="collection-actions") as actions:
        with gr.Row(equal_height=True):
            file_picker = gr.Dropdown(choices=[], label="File", scale=3, elem_id="file-picker", interactive=True)
            remove = gr.Button("Remove from collection", size="sm", scale=1, elem_id="remove-file")
        delete = gr.Button("Delete this collection", size="sm", variant="secondary", elem_id="delete-collection")
    return actions, file_picker, remove, delete


def wire_documents_tab(
    documents: DocumentsPanel, ui: DocumentsUi, chat_collection: Any, server_section: ServerSection
) -> None:
    """Their queue ("documents") is not the chat's, so chat keeps answering while files are indexed; everything
    that reads or changes collections runs in it, in the order it was asked for."""
    queue: dict[str, Any] = {"concurrency_id": "documents"}
    ui.collection.input(documents.view, [ui.collection], ui.view, **queue)
    create_outputs = [*ui.view, chat_collection, ui.new_name]
    ingest_outputs = [ui.progress, ui.table, ui.file_picker, ui.summary, ui.cancel, ui.upload]
    for trigger in (ui.create.click, ui.new_name.submit):
        trigger(documents.create, [ui.new_name, chat_collection], create_outputs, **queue).success(
            documents.add_kept, [ui.collection, ui.upload], ingest_outputs, **queue
        )
    ui.upload.upload(documents.add_files, [ui.collection, ui.upload], ingest_outputs, **queue)
    ui.folder_upload.upload(documents.add_files, [ui.collection, ui.folder_upload], ingest_outputs, **queue)
    ui.cancel.click(documents.cancel, outputs=[ui.cancel], queue=False, show_progress="hidden")
    ui.remove.click(documents.remove_file, [ui.collection, ui.file_picker], ui.view, **queue)
    ui.delete.click(lambda: gr.update(visible=True), outputs=[ui.confirm_row], queue=False)
    ui.keep.click(lambda: gr.update(visible=False), outputs=[ui.confirm_row], queue=False)
    ui.confirm.click(documents.delete, [ui.collection, chat_collection], [*ui.view, chat_collection], **queue).then(
        lambda: gr.update(visible=False), outputs=[ui.confirm_row], queue=False
    )
    wire_server_section(server_section, ui.server, ui, chat_collection)
