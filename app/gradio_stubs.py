"""Gradio without its stub writer, and without the MCP SDK it imports for a server Hearth never starts.

Every Gradio component class, as it is defined, re-reads its own source file, parses it and rewrites the ``.pyi``
stub beside it in the installed package (``gradio.component_meta.create_or_modify_pyi``): a tool for Gradio's own
developers that runs at every import and writes into site-packages; pure-Python CPU work, it weighs most on a busy
machine. :func:`install` makes that function do nothing the moment its module is loaded, before any component class
is made; the components themselves are Gradio's own, unchanged.

``gradio.mcp`` imports the MCP SDK's server modules in its ``GradioMCPServer`` class body, inside ``try: … except
ImportError: pass``; that builds the SDK's pydantic models in every process that imports Gradio (1.4 s of the import
here: bench/data/gradio-import.txt). Hearth serves its page with Gradio's MCP server off
(``mcp_server=False``, app/api/server.py), so while that one module runs the SDK reads as not installed; the SDK
itself is untouched and imports as usual afterwards (Hearth's own tools use it, app/tools/).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

_MODULE = "gradio.component_meta"
_WRITER = "create_or_modify_pyi"
_MCP_SERVER_MODULE = "gradio.mcp"
_MCP_SDK = "mcp"

Runner = Callable[[ModuleType], None]


def _no_stub(*_args: Any, **_kwargs: Any) -> None:
    return None


def _writer_off(run_module: Runner) -> Runner:
    def exec_module(module: ModuleType) -> None:
        run_module(module)
        if hasattr(module, _WRITER):
            setattr(module, _WRITER, _no_stub)

    return exec_module


def _without_mcp_sdk(run_module: Runner) -> Runner:
    def exec_module(module: ModuleType) -> None:
        if _MCP_SDK in sys.modules:  # imported already: there is nothing left to save
            run_module(module)
            return
        sys.modules[_MCP_SDK] = None  # type: ignore[assignment]  # Python's own way to make an import fail
        try:
            run_module(module)
        finally:
            if _MCP_SDK in sys.modules and sys.modules[_MCP_SDK] is None:
                del sys.modules[_MCP_SDK]

    return exec_module


_WRAPS: dict[str, Callable[[Runner], Runner]] = {_MODULE: _writer_off, _MCP_SERVER_MODULE: _without_mcp_sdk}


class _StubWriterOff(importlib.abc.MetaPathFinder):
    """Finds ``gradio.component_meta`` and ``gradio.mcp`` as Python would, and runs them as said above."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        wrap = _WRAPS.get(fullname)
        if wrap is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = spec.loader if spec is not None else None
        if spec is None or not isinstance(loader, importlib.abc.Loader):
            return spec
        loader.exec_module = wrap(loader.exec_module)  # type: ignore[method-assign,assignment]
        return spec


def install() -> None:
    """Turn the stub writer off: at once when Gradio's module is loaded already (classes made before keep their
    stubs as written), otherwise the moment it loads; and keep the MCP SDK out of ``gradio.mcp`` when that is still
    to load. Installing again adds no second finder."""
    loaded = sys.modules.get(_MODULE)
    if loaded is not None and hasattr(loaded, _WRITER):
        setattr(loaded, _WRITER, _no_stub)
    if not any(isinstance(finder, _StubWriterOff) for finder in sys.meta_path):
        sys.meta_path.insert(0, _StubWriterOff())
