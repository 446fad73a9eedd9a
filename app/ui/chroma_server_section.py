"""The Documents tab's Chroma server section: where new collections are kept, and a way to put them on a Chroma
server (or back in the data folder) from the page. Wiring only: the choice is checked and kept by
``app.services.library.chroma_choice``; the document services are built again on their next use, with it.

Connecting reads a token file and sends what it holds to the address given, so it is done only from a page opened on
this computer: a page reached from elsewhere (served beyond loopback, with the key) could otherwise name any file
this account can read and have it sent to a server of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr

from app.services.library.chroma_choice import ServerChoice, ServerChoiceFile, choose, current_choice, unencrypted
from app.ui.errors import as_gradio_error
from app.ui.page_request import from_this_computer
from models.shared.errors import HearthError

ONLY_HERE = (
    "The Chroma server can be changed only from a page opened on this computer: connecting reads a token file of "
    "yours and sends it to the address. Connect there, or set HEARTH_RAG__CHROMA_URL where Hearth starts."
)

if TYPE_CHECKING:
    from app.ui.documents import DocumentsPanel, DocumentsUi


def server_status(choice: ServerChoice | None) -> str:
    """Where new collections go, as the section says it."""
    if choice is None:
        return (
            "New collections are kept in this computer's data folder. To keep them on a Chroma server instead "
            "(one that other computers can use too), give its address and press **Connect**."
        )
    shown = f"`{choice.url}`"  # as code: not a link to open
    if unencrypted(choice):
        shown += " (unencrypted: passages and questions cross the network as they are)"
    if choice.source == "settings":
        return (
            f"New collections are made on the Chroma server {shown}, as set where Hearth was started (its "
            "settings win over this section). Collections already in the data folder stay there."
        )
    return (
        f"New collections are made on the Chroma server {shown}. Collections already in the data folder stay there "
        "and keep working; **Use the data folder only** makes new ones here again."
    )


@dataclass
class ServerUi:
    status: Any
    address: Any
    token_file: Any
    ca_file: Any
    connect: Any
    disconnect: Any

    @property
    def shown(self) -> list[Any]:
        return [self.status, self.address, self.token_file, self.ca_file, self.connect, self.disconnect]


def build_server_section() -> ServerUi:
    with gr.Accordion("Chroma server", open=False, elem_id="chroma-server"):
        status = gr.Markdown("", elem_id="chroma-server-status")
        with gr.Row(equal_height=True):
            address = gr.Textbox(label="Address", placeholder="http://HOST:8000", scale=2, elem_id="chroma-address")
            token_file = gr.Textbox(
                label="Token file (optional)",
                placeholder="a file in Hearth's data folder that only you can read",
                scale=2,
                elem_id="chroma-token",
            )
            ca_file = gr.Textbox(
                label="Certificate authority file (optional)", placeholder="PEM", scale=2, elem_id="chroma-ca"
            )
        with gr.Row(equal_height=True):
            connect = gr.Button("Connect", size="sm", scale=0, min_width=120, elem_id="chroma-connect")
            disconnect = gr.Button(
                "Use the data folder only", size="sm", scale=0, min_width=200, elem_id="chroma-disconnect"
            )
    return ServerUi(status, address, token_file, ca_file, connect, disconnect)


class ServerSection:
    def __init__(self, documents: DocumentsPanel) -> None:
        self.documents = documents
        self.services = documents.services

    def view(self) -> tuple[Any, ...]:
        choice = current_choice(self.services.settings, self.services.paths.chroma_server_file)
        editable = choice is None or choice.source == "page"
        return (
            server_status(choice),
            gr.update(value=choice.url if choice else "", interactive=editable),
            gr.update(value=str(choice.token_file or "") if choice else "", interactive=editable),
            gr.update(value=str(choice.ca_file or "") if choice else "", interactive=editable),
            gr.update(visible=editable),
            gr.update(visible=editable and choice is not None),
        )

    def connect(
        self,
        address: str,
        token_file: str,
        ca_file: str,
        collection: str | None,
        chat_collection: str | None,
        request: gr.Request,
    ) -> tuple[Any, ...]:
        if not from_this_computer(request):
            raise gr.Error(ONLY_HERE, title="Hearth", print_exception=False)
        if not address.strip():
            raise gr.Error(
                "Give the Chroma server's address first, for example http://192.168.1.20:8000.",
                title="Hearth",
                print_exception=False,
            )
        try:
            paths = self.services.paths
            choice = choose(
                paths.chroma_server_file, address, token_file, ca_file, paths.hearths_own(), token_folder=paths.root
            )
        except HearthError as exc:
            raise as_gradio_error(exc) from exc
        self.services.documents.close()  # built again on its next use, with the server
        plain = " It is not encrypted (http://): passages cross the network as they are." if unencrypted(choice) else ""
        gr.Info(f"Connected to {choice.url}: new collections are made there.{plain}", duration=8)
        return (*self.view(), *self.documents.refresh(collection, chat_collection))

    def disconnect(self, collection: str | None, chat_collection: str | None) -> tuple[Any, ...]:
        ServerChoiceFile(self.services.paths.chroma_server_file).clear()
        self.services.documents.close()
        gr.Info("New collections are kept in the data folder again.", duration=5)
        return (*self.view(), *self.documents.refresh(collection, chat_collection))


def wire_server_section(section: ServerSection, ui: ServerUi, documents_ui: DocumentsUi, chat_collection: Any) -> None:
    """In the documents' queue, so a change of server never lands in the middle of files being added."""
    queue: dict[str, Any] = {"concurrency_id": "documents"}
    refreshed = [*ui.shown, *documents_ui.view, chat_collection]
    ui.connect.click(
        section.connect,
        [ui.address, ui.token_file, ui.ca_file, documents_ui.collection, chat_collection],
        refreshed,
        **queue,
    )
    ui.disconnect.click(section.disconnect, [documents_ui.collection, chat_collection], refreshed, **queue)
