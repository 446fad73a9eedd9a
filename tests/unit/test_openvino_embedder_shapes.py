"""Which sentence-transformers folders OpenVINO runs as sentence-transformers does (rag.retrieval.openvino_embedder
.supported): a transformer, mean or CLS pooling, optionally normalization, and a tokenizer.json; anything else stays
with sentence-transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.retrieval.openvino_embedder import supported

TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
POOLING = {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
NORMALIZE = {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
DENSE = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
MEAN = {"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}


def folder(
    tmp_path: Path, modules: list[dict[str, object]], pooling: dict[str, object], tokenizer: bool = True
) -> Path:
    (tmp_path / "1_Pooling").mkdir(parents=True)
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    if tokenizer:
        (tmp_path / "tokenizer.json").write_text("{}")
    return tmp_path


@pytest.mark.parametrize(
    ("modules", "pooling"),
    [
        ([TRANSFORMER, POOLING, NORMALIZE], MEAN),
        ([TRANSFORMER, POOLING], MEAN),
        ([TRANSFORMER, POOLING], {**MEAN, "pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}),
    ],
    ids=["mean, normalized", "mean", "cls"],
)
def test_what_it_runs(tmp_path: Path, modules: list[dict[str, object]], pooling: dict[str, object]) -> None:
    assert supported(folder(tmp_path, modules, pooling))


@pytest.mark.parametrize(
    ("modules", "pooling"),
    [
        ([TRANSFORMER, POOLING, DENSE], MEAN),
        ([TRANSFORMER, POOLING], {**MEAN, "pooling_mode_max_tokens": True}),
        (
            [TRANSFORMER, POOLING],
            {**MEAN, "pooling_mode_mean_tokens": False, "pooling_mode_mean_sqrt_len_tokens": True},
        ),
        ([POOLING, TRANSFORMER], MEAN),
    ],
    ids=["a dense layer", "mean and max", "sqrt-length mean", "out of order"],
)
def test_what_stays_with_sentence_transformers(
    tmp_path: Path, modules: list[dict[str, object]], pooling: dict[str, object]
) -> None:
    assert not supported(folder(tmp_path, modules, pooling))


def test_a_folder_without_a_fast_tokenizer_or_with_broken_files_stays(tmp_path: Path) -> None:
    assert not supported(folder(tmp_path / "a", [TRANSFORMER, POOLING], MEAN, tokenizer=False))
    broken = folder(tmp_path / "b", [TRANSFORMER, POOLING], MEAN)
    (broken / "modules.json").write_text("{not json")
    assert not supported(broken)
    assert not supported(tmp_path / "nowhere")
