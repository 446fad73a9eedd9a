from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.settings import DEFAULT_SYSTEM_PROMPT, load_settings
from models.shared.errors import HearthError


def test_defaults_are_private_and_sensible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEARTH_HOME")
    settings = load_settings()
    assert settings.server.host == "127.0.0.1"
    assert settings.server.port == 7860
    assert settings.model.path is None  # the embedded model
    assert settings.backend.name == "auto"
    assert settings.generation.system_prompt == DEFAULT_SYSTEM_PROMPT
    assert settings.home is None


def test_an_empty_path_setting_is_unset_not_the_current_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    for empty in ("", "  "):
        for name in ("HEARTH_HOME", "HEARTH_MODEL__PATH", "HEARTH_RAG__RERANKER_PATH"):
            monkeypatch.setenv(name, empty)
        settings = load_settings()
        assert (settings.home, settings.model.path, settings.rag.reranker_path) == (None, None, None)
        assert resolve_data_paths(settings.home).root != Path.cwd()


def test_nested_environment_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HEARTH_MODEL__CONTEXT_LENGTH", "2048")
    monkeypatch.setenv("HEARTH_SERVER__PORT", "7999")
    monkeypatch.setenv("HEARTH_BACKEND__NAME", "fake")
    settings = load_settings()
    assert settings.model.context_length == 2048
    assert settings.server.port == 7999
    assert settings.backend.name == "fake"
    assert settings.home == tmp_path / "hearth-home"


def test_overrides_win_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEARTH_MODEL__CONTEXT_LENGTH", "2048")
    settings = load_settings(model={"context_length": 1024}, generation={"temperature": 0.0})
    assert settings.model.context_length == 1024
    assert settings.generation.temperature == 0.0
    assert settings.generation.max_new_tokens == 512


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("HEARTH_MODEL__CONTEXT_LENGTH", "12", "model.context_length"),
        ("HEARTH_GENERATION__TEMPERATURE", "hot", "generation.temperature"),
        ("HEARTH_BACKEND__NAME", "tpu", "backend.name"),
        ("HEARTH_BACKEND__KV_CACHE_TYPE", "q2_k", "backend.kv_cache_type"),
    ],
)
def test_invalid_settings_name_the_setting_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, key: str, value: str, named: str
) -> None:
    monkeypatch.setenv(key, value)
    with pytest.raises(HearthError) as caught:
        load_settings()
    assert named in caught.value.message
    assert "HEARTH_" in caught.value.remedy


def test_data_dir_follows_hearth_home(tmp_path: Path) -> None:
    paths = resolve_data_paths(tmp_path / "x")
    assert paths.conversations_db == (tmp_path / "x" / "conversations.db").resolve()


def test_data_dir_defaults_to_the_platform_location() -> None:
    paths = resolve_data_paths(None)
    assert paths.root.name == "hearth"


def test_the_recommended_model_is_a_packaged_one() -> None:
    from app.settings import ModelSettings
    from models.catalog import RECOMMENDED_CHAT

    assert ModelSettings().recommended == RECOMMENDED_CHAT
    assert ModelSettings(recommended="qwen2.5-coder-0.5b").recommended == "qwen2.5-coder-0.5b"
    with pytest.raises(ValueError, match="'gpt-5' is not a packaged model; `hearth models available` lists them"):
        ModelSettings(recommended="gpt-5")
