"""Errors speak of the page's controls on the page and of commands on the command line: an error whose remedy
names a command, a flag or an environment variable also says what to do in the page (``page_remedy``), unless it
can only be met outside the page (listed below, each with its reason). A scan of the product's source holds a new
message to it the day it is written."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.ui.errors import as_gradio_error
from app.ui.models_view import page_message
from models.quantize import AlreadyQuantized
from models.shared.errors import HearthError
from rag.manifest import Manifest


def test_the_page_says_the_page_remedy_and_the_terminal_keeps_the_command() -> None:
    error = HearthError("It is known.", "Run `hearth models default abc`.", page_remedy="Pick it in the Model list.")
    assert error.for_page == "It is known. Pick it in the Model list."
    assert str(error) == "It is known. Run `hearth models default abc`."
    assert "Model list" in str(as_gradio_error(error)) and "hearth" not in page_message(error)
    plain = HearthError("Something.", "Do this.")
    assert plain.for_page == "Something. Do this." == page_message(plain)


def test_a_class_wide_page_remedy_still_applies() -> None:
    refused = AlreadyQuantized("It is quantized.", "Pass --allow-requantize.")
    assert "Allow re-quantizing" in page_message(refused) and "--" not in page_message(refused)


def test_an_unknown_collection_points_at_the_documents_tab(tmp_path: Path) -> None:
    manifest = Manifest(tmp_path / "index.db")
    try:
        with pytest.raises(HearthError) as missing:
            manifest.get("nowhere")
    finally:
        manifest.close()
    assert "hearth ingest" in missing.value.remedy
    assert "Documents tab" in missing.value.for_page and "hearth" not in missing.value.for_page


ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "backends", "rag", "models")
# A command (`hearth ui`), a flag (--context) or a setting's environment variable (HEARTH_HOME).
COMMAND_WORDS = re.compile(r"`?hearth [a-z]|(^|[\s(`])--[a-z]|HEARTH_[A-Z]")

# Modules only the terminal, the API or a worker reaches: their remedies rightly name commands and flags.
OUTSIDE_THE_PAGE = {
    "app/cli/": "the command line: its parser and its commands",
    "app/api/": "answers to API clients, who work with settings and commands",
    "app/bench/": "`hearth bench`'s refusals, on the terminal that ran it: they name its options",
    "app/paths.py": "the data folder is checked before any page exists",
    "models/shared/database.py": "a store from a newer Hearth is refused at start, on the terminal",
    "app/desktop/toolkit.py": "no window could open: said on the terminal that started it",
    "app/services/upkeep/repair.py": "`hearth repair`'s own refusal",
    "backends/workers/device.py": "`hearth worker --device` on the worker's own terminal",
    "rag/retrieval/rerank.py": "the reranker is on only through that setting: the remedy names where it was set",
    "models/catalog.py": "the installation itself is damaged; no control in the page can mend it",
    "models/embedded.py": "the installation itself is damaged; no control in the page can mend it",
}


def _text(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
    if isinstance(node, ast.BinOp):
        left, right = _text(node.left), _text(node.right)
        return None if left is None or right is None else left + right
    return None


def _trees() -> Iterator[tuple[str, ast.Module]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _error_classes(trees: list[tuple[str, ast.Module]]) -> tuple[set[str], set[str]]:
    """Every class that derives from HearthError, and those of them that set a ``page_remedy`` of their own."""
    bases: dict[str, list[str]] = {}
    own_page_remedy: set[str] = set()
    for _, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                for item in node.body:
                    targets = item.targets if isinstance(item, ast.Assign) else []
                    if (
                        any(isinstance(t, ast.Name) and t.id == "page_remedy" for t in targets)
                        and isinstance(item, ast.Assign)
                        and _text(item.value)
                    ):
                        own_page_remedy.add(node.name)
    errors = {"HearthError"}
    changed = True
    while changed:
        changed = False
        for name, parents in bases.items():
            if name not in errors and any(parent in errors for parent in parents):
                errors.add(name)
                changed = True
    return errors, own_page_remedy


def _outside_the_page(module: str) -> bool:
    return any(module == key or (key.endswith("/") and module.startswith(key)) for key in OUTSIDE_THE_PAGE)


def command_remedies_without_page_words() -> list[str]:
    trees = list(_trees())
    errors, own_page_remedy = _error_classes(trees)
    found = []
    for module, tree in trees:
        if _outside_the_page(module):
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in errors):
                continue
            remedy = _text(node.args[1]) if len(node.args) > 1 else None
            if remedy is None or not COMMAND_WORDS.search(remedy):
                continue
            if node.func.id in own_page_remedy or any(k.arg == "page_remedy" for k in node.keywords):
                continue
            found.append(f"{module}:{node.lineno} {node.func.id}: {remedy}")
    return found


def test_every_remedy_that_names_a_command_says_it_in_the_pages_words_too() -> None:
    assert command_remedies_without_page_words() == []


def test_the_scan_finds_such_a_remedy() -> None:
    # The scan itself is checked on the CLI's refusals, which rightly name commands: it must see them.
    trees = [(m, t) for m, t in _trees() if m.startswith("app/cli/")]
    errors, _ = _error_classes(list(_trees()))
    calls = [
        node
        for _, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in errors
        and len(node.args) > 1
        and (remedy := _text(node.args[1]))
        and COMMAND_WORDS.search(remedy)
    ]
    assert len(calls) >= 5


def test_outside_the_page_entries_still_exist() -> None:
    for module in OUTSIDE_THE_PAGE:
        assert (ROOT / module).exists(), f"{module} is gone: take it off the list"


def test_an_error_from_the_engine_process_keeps_its_page_words() -> None:
    import pickle

    from backends.engine.protocol import ErrorInfo
    from models.shared.errors import ModelLoadError

    sent = ModelLoadError("llama.cpp could not create a context.", "Lower --context.", page_remedy="Pick a smaller.")
    back = pickle.loads(pickle.dumps(ErrorInfo.of(sent))).to_exception()
    assert type(back) is ModelLoadError
    assert back.for_page == "llama.cpp could not create a context. Pick a smaller."
    assert str(back) == "llama.cpp could not create a context. Lower --context."
    plain = pickle.loads(pickle.dumps(ErrorInfo.of(ModelLoadError("No.", "Lower --context.")))).to_exception()
    assert plain.page_remedy is None and plain.for_page == "No. Lower --context."


def test_an_error_class_from_any_layer_crosses_the_engine_pipe() -> None:
    import pickle

    from backends.engine.protocol import ErrorInfo
    from backends.workers.rpc import WorkerUnreachable
    from models.shared.errors import EngineStopped, GenerationError, WorkersStopped, error_class

    sent = WorkerUnreachable("The worker at 10.0.0.2:50052 does not answer.", "Start it.", page_remedy="Start it.")
    back = pickle.loads(pickle.dumps(ErrorInfo.of(sent))).to_exception()
    assert type(back) is WorkerUnreachable and back.message == sent.message  # was GenerationError once
    # A class that needs more than a message and a remedy comes back as its nearest ancestor that does not.
    stopped = WorkersStopped("Worker w stopped.", "Start it again.", ("w:1",))
    assert type(ErrorInfo.of(stopped).to_exception()) is EngineStopped
    assert error_class("WorkersStopped") is EngineStopped and error_class("EngineStopped") is EngineStopped
    assert error_class("NoSuchError") is None
    assert type(ErrorInfo("NoSuchError", "Odd.", "Retry.").to_exception()) is GenerationError
