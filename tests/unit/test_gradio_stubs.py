"""app.gradio_stubs.install: the stub writer off whether Gradio's module is loaded already or later; the MCP SDK
kept out of ``gradio.mcp`` only while that module runs."""

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


def _imports_the_sdk(found: list[object]) -> gradio_stubs.Runner:
    def run(_module: types.ModuleType) -> None:
        try:
            import mcp

            found.append(mcp)
        except ImportError as exc:
            found.append(exc)

    return run


def test_the_mcp_sdk_reads_as_missing_only_while_gradios_mcp_module_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "mcp", raising=False)
    found: list[object] = []
    gradio_stubs._without_mcp_sdk(_imports_the_sdk(found))(types.ModuleType("gradio.mcp"))
    assert isinstance(found[0], ImportError)
    assert "mcp" not in sys.modules  # not left marked as missing: the next import finds the SDK


def test_an_sdk_imported_already_is_left_to_the_module(monkeypatch: pytest.MonkeyPatch) -> None:
    sdk = types.ModuleType("mcp")
    monkeypatch.setitem(sys.modules, "mcp", sdk)
    found: list[object] = []
    gradio_stubs._without_mcp_sdk(_imports_the_sdk(found))(types.ModuleType("gradio.mcp"))
    assert found == [sdk] and sys.modules["mcp"] is sdk


def test_the_finder_answers_for_gradios_mcp_module_too() -> None:
    finder = gradio_stubs._StubWriterOff()
    spec = finder.find_spec("gradio.mcp", None)
    assert spec is not None and spec.name == "gradio.mcp"
