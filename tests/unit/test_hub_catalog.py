"""The curated list of hub models (models/hub_catalog.py): every entry names a repository, a single-file GGUF in it,
a size, a licence and a model of the size people run on AI PCs; none shares a name with a packaged model."""

from __future__ import annotations

import re

import pytest

from models.catalog import CATALOG
from models.hub import parse_reference, quantization_of
from models.hub_catalog import HUB_CATALOG, HubModel

LICENCES = {"apache-2.0", "mit", "llama3.2", "gemma", "qwen-research"}


def test_there_are_at_least_six_current_models_from_half_a_billion_to_eight_billion_parameters() -> None:
    assert len(HUB_CATALOG) >= 6
    assert all(0.5 <= m.parameters_b <= 8.0 for m in HUB_CATALOG.values())
    assert len({m.title for m in HUB_CATALOG.values()}) == len(HUB_CATALOG)  # six models, not six files of one


@pytest.mark.parametrize("model", list(HUB_CATALOG.values()), ids=list(HUB_CATALOG))
def test_each_entry_names_a_repository_a_file_a_size_and_a_licence(model: HubModel) -> None:
    assert parse_reference(model.reference) == model.hub_file  # a name `hearth models install` takes as it is
    assert re.fullmatch(r"[A-Za-z0-9._-]+/[A-Za-z0-9._-]+-GGUF", model.repo), model.repo
    assert model.file_name.endswith(".gguf") and "/" not in model.file_name
    assert quantization_of(model.file_name) == "Q4_K_M"
    # Q4_K_M files weigh about 0.5 to 0.7 bytes a parameter
    assert 0.45e9 * model.parameters_b <= model.size_bytes <= 0.75e9 * model.parameters_b, model.size_bytes
    assert model.license in LICENCES
    if model.license not in ("apache-2.0", "mit"):
        assert model.note, f"{model.key}: say what the {model.license} licence asks"


def test_no_curated_name_is_also_a_packaged_models_name() -> None:
    assert not set(HUB_CATALOG) & set(CATALOG)
    assert all(m.key == k and re.fullmatch(r"[a-z0-9.-]+", k) for k, m in HUB_CATALOG.items())


def test_the_recommendation_is_the_largest_curated_model_that_leaves_half_the_free_memory() -> None:
    from models.catalog import CATALOG, RECOMMENDED_CHAT, RUNTIME_OVERHEAD
    from models.hub_catalog import best_fitting

    default = CATALOG[RECOMMENDED_CHAT].size_bytes
    gib = 1 << 30

    def best(free_gib: float) -> str | None:
        found = best_fitting(HUB_CATALOG.values(), int(free_gib * gib), RUNTIME_OVERHEAD, default)
        return found.key if found is not None else None

    assert best(24) == "qwen2.5-7b"  # 4.4 GiB file, about 5.7 GiB loaded: under half of 24
    assert best(10) == "qwen3-4b-2507"  # the 7B would take more than half; of the 4B ones, the most parameters
    assert best(5.5) == "llama-3.2-3b"
    assert best(3) is None  # nothing larger than the default leaves half of 3 GiB free
    assert best_fitting(HUB_CATALOG.values(), 64 * gib, RUNTIME_OVERHEAD, 10 * gib) is None  # none larger
