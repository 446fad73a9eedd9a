"""app.gradio_stubs.install: the stub writer off whether Gradio's module is loaded already or later."""

from __future__ import annotations

import sys
import types

import pytest

from app import gradio_stubs


def test_a_module_already_loaded_has_its_writer_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = types.ModuleType("gradio.component_meta")
    loaded.create_or_modify_pyi = lambda *args: "written"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gradio.component_meta", loaded)
    gradio_stubs.install()
    assert loaded.create_or_modify_pyi() is None  # type: ignore[attr-defined]


def test_a_module_without_the_writer_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = types.ModuleType("gradio.component_meta")
    monkeypatch.setitem(sys.modules, "gradio.component_meta", loaded)
    gradio_stubs.install()
    assert not hasattr(loaded, "create_or_modify_pyi")


def test_the_finder_is_installed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "gradio.component_meta", raising=False)
    # importing app installed one already: start from a meta path without it
    others = [finder for finder in sys.meta_path if not isinstance(finder, gradio_stubs._StubWriterOff)]
    monkeypatch.setattr(sys, "meta_path", others)
    gradio_stubs.install()
    gradio_stubs.install()
    finders = [finder for finder in sys.meta_path if isinstance(finder, gradio_stubs._StubWriterOff)]
    assert len(finders) == 1 and sys.meta_path[0] is finders[0]


def test_the_finder_answers_only_for_gradios_module() -> None:
    finder = gradio_stubs._StubWriterOff()
    assert finder.find_spec("json", None) is None
    assert finder.find_spec("gradio.components", None) is None
