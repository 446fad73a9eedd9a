"""Gradio without its stub writer.

Every Gradio component class, as it is defined, re-reads its own source file, parses it and rewrites the ``.pyi``
stub beside it in the installed package (``gradio.component_meta.create_or_modify_pyi``): a tool for Gradio's own
developers that runs at every import and writes into site-packages; pure-Python CPU work, it weighs most on a busy
machine. :func:`install` makes that function do nothing the moment its module is loaded, before any component class
is made; the components themselves are Gradio's own, unchanged.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

_MODULE = "gradio.component_meta"
_WRITER = "create_or_modify_pyi"


def _no_stub(*_args: Any, **_kwargs: Any) -> None:
    return None


class _StubWriterOff(importlib.abc.MetaPathFinder):
    """Finds ``gradio.component_meta`` as Python would, and turns its stub writer off once the module has run."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = spec.loader if spec is not None else None
        if spec is None or not isinstance(loader, importlib.abc.Loader):
            return spec
        run_module = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            if hasattr(module, _WRITER):
                setattr(module, _WRITER, _no_stub)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Turn the stub writer off: at once when Gradio's module is loaded already (classes made before keep their
    stubs as written), otherwise the moment it loads. Installing again adds no second finder."""
    loaded = sys.modules.get(_MODULE)
    if loaded is not None:
        if hasattr(loaded, _WRITER):
            setattr(loaded, _WRITER, _no_stub)
        return
    if not any(isinstance(finder, _StubWriterOff) for finder in sys.meta_path):
        sys.meta_path.insert(0, _StubWriterOff())
