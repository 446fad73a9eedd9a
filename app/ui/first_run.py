"""What the Chat tab says while the embedded model answers: that it is the small built-in model
and what that means, the recommended model with its size and a button to install it (or to use it, when it is
installed already), and how to add a model without a network. Pure: no Gradio here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from backends.memory import format_bytes
from models.catalog import PackagedModel
from models.hub_catalog import HubModel

OFFLINE = (
    "No network? Copy a `.gguf` chat model onto this computer and add it in the **Models** tab (Import a GGUF file)."
)


@dataclass(frozen=True)
class FirstRun:
    """The note above the chat, and which of its buttons to show."""

    text: str
    install: bool  # the recommended model is not installed: offer to install it
    use_id: str | None = None  # it is installed but not in use: offer to switch to it (its id in the catalog)


def first_run(
    in_use: Path | None,
    embedded: Path,
    recommended: PackagedModel,
    installed_id: str | None,
    larger: HubModel | None = None,
) -> FirstRun | None:
    """The note while ``in_use`` is the embedded model; None for any other model (or none). ``larger``: a current
    model from the Hugging Face Hub that fits this computer with room to spare, named as the step after."""
    if in_use is None or not _same(in_use, embedded):
        return None
    small = (
        "You are chatting with **Hearth's small built-in model** (135 million parameters): it answers at once, but "
        "it is often wrong and cannot follow documents well."
    )
    more = (
        f" This computer also has room for **{larger.title}** ({format_bytes(larger.size_bytes)}): Models tab, "
        "*Install a current model from the Hugging Face Hub*."
        if larger is not None
        else ""
    )
    if installed_id is not None:
        return FirstRun(
            f"{small} **{recommended.title}** is installed and answers far better: use it for chat.{more}",
            install=False,
            use_id=installed_id,
        )
    size = format_bytes(recommended.size_bytes)
    return FirstRun(
        f"{small} **{recommended.title}** ({size} download, {recommended.license}) answers far better on a computer "
        f"like this one.{more} {OFFLINE}",
        install=True,
    )


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
