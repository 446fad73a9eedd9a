"""Benchmarks and evaluations read every prompt as a first reading: they build their services through
``measuring()``, which turns off the caches an earlier run could have saved and the kept passages."""

from __future__ import annotations

import re
from pathlib import Path

from app.services.container import measuring
from app.settings import Settings

ROOT = Path(__file__).parents[2]


def test_measuring_turns_the_saved_caches_and_the_kept_passages_off_and_nothing_else() -> None:
    settings = Settings()
    assert settings.backend.conversation_cache_mb > 0 and settings.backend.passage_cache_mb > 0
    assert settings.rag.keep_passages
    measured = measuring(settings)
    assert measured.backend.conversation_cache_mb == measured.backend.passage_cache_mb == 0
    assert not measured.rag.keep_passages  # a benchmark or evaluation keeps passages only when it asks to
    saved = {"conversation_cache_mb": settings.backend.conversation_cache_mb, "passage_cache_mb": 512}
    assert measured.backend.model_copy(update=saved) == settings.backend
    assert measured.rag.model_copy(update={"keep_passages": True}) == settings.rag
    assert measured.model_copy(update={"backend": settings.backend, "rag": settings.rag}) == settings


def test_every_benchmark_and_evaluation_builds_its_services_through_measuring() -> None:
    sources = [*sorted((ROOT / "app" / "bench").glob("*.py")), *sorted((ROOT / "app" / "cli").glob("eval*.py"))]
    calls = {path.name: re.findall(r"build_services\((\w+)", path.read_text(encoding="utf-8")) for path in sources}
    assert sum(len(found) for found in calls.values()) >= 9  # the check reads the calls it means to
    assert {name: found for name, found in calls.items() if any(f != "measuring" for f in found)} == {}
