"""The same sentence-transformers model run by OpenVINO, without importing sentence-transformers, transformers or
torch in the process that embeds.

Importing sentence-transformers brings transformers, torch, scikit-learn, SciPy and pandas with it, which every
process that embeds pays before its first vector (10.10 s to it here against 0.73 s this way:
bench/data/embedder-runtime.txt): a single file added with
`hearth ingest`, a question about documents in a new page process, a search from the command line. OpenVINO and
Hugging Face's ``tokenizers`` import in under a second. The model is the folder's own: its transformer is converted
to OpenVINO's format once per model (with torch, in a child process, the one time it is needed) and kept in the cache
folder; tokenizing uses the folder's ``tokenizer.json``, and pooling and normalizing follow the folder's own
sentence-transformers configuration. Only folders this module can reproduce exactly are taken: a transformer, then
mean or CLS pooling, then optionally normalization (:func:`supported`); anything else stays with
sentence-transformers.

The vectors are the same model's, computed by other kernels in float32 (OpenVINO is told not to lower the
precision): they differ from sentence-transformers' in the last bits only (``tests/integration/
test_openvino_embedder.py`` compares them), so both carry the same embedder name and a collection built by one is
searched by the other.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from models.shared.errors import HearthError

CONVERTED = "model.xml"
MODULE_TRANSFORMER = "sentence_transformers.models.Transformer"
MODULE_POOLING = "sentence_transformers.models.Pooling"
MODULE_NORMALIZE = "sentence_transformers.models.Normalize"

# Run in a child process: the conversion needs torch and transformers, which the embedding process does without.
CONVERT = """
import sys
import openvino as ov
import torch
from transformers import AutoModel
source, target = sys.argv[1], sys.argv[2]
model = AutoModel.from_pretrained(source, local_files_only=True)
model.eval()
ids = torch.ones((2, 8), dtype=torch.long)
example = {"input_ids": ids, "attention_mask": ids, "token_type_ids": torch.zeros_like(ids)}
with torch.no_grad():
    converted = ov.convert_model(model, example_input=example)
ov.save_model(converted, target, compress_to_fp16=False)
"""


class EmbedderConversionError(HearthError):
    """The model could not be converted for OpenVINO."""


def supported(model_dir: Path) -> bool:
    """Whether the folder is a transformer, mean or CLS pooling, and optional normalization, as this module runs
    them (and holds a ``tokenizer.json``)."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
        kinds = [module["type"] for module in modules]
        pooling = _pooling_config(model_dir, modules)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if kinds not in ([MODULE_TRANSFORMER, MODULE_POOLING], [MODULE_TRANSFORMER, MODULE_POOLING, MODULE_NORMALIZE]):
        return False
    modes = {key for key, on in pooling.items() if key.startswith("pooling_mode_") and on}
    return (
        modes in ({"pooling_mode_mean_tokens"}, {"pooling_mode_cls_token"}) and (model_dir / "tokenizer.json").is_file()
    )


def _pooling_config(model_dir: Path, modules: list[dict[str, Any]]) -> dict[str, Any]:
    path = next(module["path"] for module in modules if module["type"] == MODULE_POOLING)
    config: dict[str, Any] = json.loads((model_dir / path / "config.json").read_text(encoding="utf-8"))
    return config


def model_key(model_dir: Path) -> str:
    """The converted model's name in the cache: a digest of where the files the conversion reads are, their sizes and
    modification times (read at every process's first vector, so the weights themselves are not read for it; a
    reinstalled or changed model has new times and is converted again)."""
    digest = hashlib.sha256(str(model_dir.resolve()).encode())
    for name in ("config.json", "model.safetensors", "pytorch_model.bin"):
        path = model_dir / name
        if path.is_file():
            found = path.stat()
            digest.update(f"{name} {found.st_size} {found.st_mtime_ns}".encode())
    return digest.hexdigest()[:24]


def embedder_cache_dir() -> Path:
    """Where converted embedding models are kept for every Hearth data folder of this account:
    ``$XDG_CACHE_HOME/hearth/embedders`` (``~/.cache/hearth/embedders``), made owner-only."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hearth" / "embedders"


def converted_model(model_dir: Path, cache_dir: Path) -> Path:
    """The folder's transformer in OpenVINO's format, converted on first use (12.1 s here, once) into a folder
    of this account's alone under ``cache_dir``; written beside and renamed into place, so a second process at the
    same moment finds either nothing or the whole model."""
    target = cache_dir / model_key(model_dir)
    if (target / CONVERTED).is_file():
        return target / CONVERTED
    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    cache_dir.chmod(0o700)
    scratch = Path(tempfile.mkdtemp(prefix=".converting-", dir=cache_dir))
    try:
        made = subprocess.run(
            [sys.executable, "-c", CONVERT, str(model_dir), str(scratch / CONVERTED)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        )
        if made.returncode != 0 or not (scratch / CONVERTED).is_file():
            last = (made.stderr.strip().splitlines() or ["no output"])[-1]
            raise EmbedderConversionError(
                f"The embedding model in {model_dir} could not be converted for OpenVINO: {last}",
                "Set rag.embedder_runtime to sentence-transformers in settings, or reinstall Hearth with `make setup`.",
            )
        try:
            scratch.rename(target)
        except OSError:
            if not (target / CONVERTED).is_file():  # not another process's finished copy: a real failure
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target / CONVERTED


def _compiled(core: Any, model: Any, threads: int | None) -> Any:
    # float32 throughout: some CPUs would otherwise run it in bfloat16, other vectors than the model's
    config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": "f32"}
    if threads is not None:
        config["INFERENCE_NUM_THREADS"] = threads
    return core.compile_model(model, "CPU", config)


class TokenizerForChunks:
    """The folder's fast tokenizer, answering the calls the chunker makes of a Hugging Face tokenizer (text or a
    list of texts, special tokens or not, offsets or not), with no length limit and no padding."""

    is_fast = True

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def __call__(
        self,
        text: str | Sequence[str],
        add_special_tokens: bool = True,
        return_offsets_mapping: bool = False,
        truncation: bool = False,
        verbose: bool = False,
    ) -> dict[str, Any]:
        del truncation, verbose  # never truncated: counting and cutting is what it is for
        if isinstance(text, str):
            one = self._tokenizer.encode(text, add_special_tokens=add_special_tokens)
            found: dict[str, Any] = {"input_ids": one.ids}
            if return_offsets_mapping:
                found["offset_mapping"] = one.offsets
            return found
        many = self._tokenizer.encode_batch(list(text), add_special_tokens=add_special_tokens)
        found = {"input_ids": [e.ids for e in many]}
        if return_offsets_mapping:
            found["offset_mapping"] = [e.offsets for e in many]
        return found


class OpenVinoEmbedder:
    """A sentence-transformers folder (see :func:`supported`) embedded by OpenVINO on the CPU."""

    def __init__(self, model_dir: Path, name: str, cache_dir: Path, batch_size: int = 32) -> None:
        self._dir = model_dir
        self._name = name
        self._cache = cache_dir
        self.batch_size = batch_size
        settings = json.loads((model_dir / "sentence_bert_config.json").read_text(encoding="utf-8"))
        self._max_tokens = int(settings["max_seq_length"])
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
        pooling = _pooling_config(model_dir, modules)
        self._dimension = int(pooling["word_embedding_dimension"])
        self._mean = bool(pooling.get("pooling_mode_mean_tokens"))
        self._lock = threading.Lock()
        self._core: Any = None
        self._read: Any = None  # the converted model as read from the cache, compiled again for other threads
        self._model: Any = None
        self._threads: int | None = None  # None: OpenVINO's own choice (every core)
        self._compiled_threads: int | None = None
        self._counter: TokenizerForChunks | None = None
        self._reader: Any = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    def tokenizer(self) -> TokenizerForChunks:
        with self._lock:
            if self._counter is None:
                from tokenizers import Tokenizer

                counting = Tokenizer.from_file(str(self._dir / "tokenizer.json"))
                counting.no_truncation()
                counting.no_padding()
                self._counter = TokenizerForChunks(counting)
            return self._counter

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer()(text)["input_ids"])

    def set_threads(self, threads: int) -> None:
        """OpenVINO fixes a compiled model's threads: the model is compiled again for the next batch (from the copy
        read once, not from disk), only when the number changes."""
        with self._lock:
            self._threads = max(1, threads)

    def _ready(self) -> tuple[Any, Any]:
        """The compiled model and the tokenizer that reads for it (cut at the model's length, padded per batch)."""
        with self._lock:
            if self._read is None:
                import openvino as ov
                from tokenizers import Tokenizer

                self._core = ov.Core()
                path = converted_model(self._dir, self._cache)
                try:
                    self._read = self._core.read_model(path)
                    self._model = _compiled(self._core, self._read, self._threads)
                except RuntimeError:  # a damaged copy in the cache: made again, never used as it is
                    shutil.rmtree(path.parent, ignore_errors=True)
                    self._read = self._core.read_model(converted_model(self._dir, self._cache))
                    self._model = _compiled(self._core, self._read, self._threads)
                self._compiled_threads = self._threads
                reader = Tokenizer.from_file(str(self._dir / "tokenizer.json"))
                reader.enable_truncation(max_length=self._max_tokens)
                reader.enable_padding()
                self._reader = reader
            elif self._threads != self._compiled_threads:
                self._model = _compiled(self._core, self._read, self._threads)
                self._compiled_threads = self._threads
            return self._model, self._reader

    def compiled_threads(self) -> int:
        """The threads the compiled model computes with (what OpenVINO reports), once it has embedded."""
        with self._lock:
            return int(self._model.get_property("INFERENCE_NUM_THREADS"))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        model, reader = self._ready()
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # batches of like lengths pad less
        vectors = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chosen = order[start : start + self.batch_size]
            encoded = reader.encode_batch([texts[i] for i in chosen])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            types = np.array([e.type_ids for e in encoded], dtype=np.int64)
            with self._lock:  # one inference at a time on the compiled model
                hidden = model({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
            vectors[chosen] = self._pool(np.asarray(hidden, dtype=np.float32), mask)
        return vectors

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self._mean:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        else:
            pooled = hidden[:, 0]
        # unit length whether or not the folder ends in a Normalize module, as every Hearth embedder gives them
        pooled = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return np.asarray(pooled, dtype=np.float32)
