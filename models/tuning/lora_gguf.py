"""LoRA adapters in llama.cpp's GGUF format: written from a trained peft adapter, and checked before use.

llama.cpp reads an adapter as a GGUF with ``general.type = adapter``, ``adapter.type = lora``,
``adapter.lora.alpha``, and for each adapted weight ``W`` (``blk.N.attn_q.weight``) two tensors ``W.lora_a``
(rank x in) and ``W.lora_b`` (out x rank); it adds ``scale * alpha / rank * B @ A`` to ``W @ x``. peft's
``lora_A`` and ``lora_B`` have exactly those shapes, so they are written as they are, with two changes of name
and, for llama models, of row order: llama.cpp's converter interleaves the rows of each attention head's query
and key weights for its rotary embedding, and transformers undoes that when it loads the GGUF, so an adapter
trained in transformers' order has the rows of its query and key ``B`` put back in llama.cpp's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from models.gguf_reader import read_header
from models.shared.errors import AdapterError, ModelFileError

if TYPE_CHECKING:
    import numpy as np

    from models.gguf import ModelInfo

# Architectures whose adapters were checked end to end here (trained in transformers, answered through
# llama.cpp): the ones Hearth offers to tune.
TUNABLE_ARCHITECTURES = ("llama", "qwen2")
# llama.cpp's names of the weights each peft target adapts.
GGUF_TARGETS = {
    "q_proj": "attn_q",
    "k_proj": "attn_k",
    "v_proj": "attn_v",
    "o_proj": "attn_output",
    "gate_proj": "ffn_gate",
    "up_proj": "ffn_up",
    "down_proj": "ffn_down",
}
_PEFT_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])(?:\.\w+)?\.weight$")
BASE_SHA_KEY = "hearth.base_model.sha256"


@dataclass(frozen=True)
class AdapterFacts:
    """What an adapter file says about itself."""

    architecture: str
    alpha: float
    rank: int
    tensors: int  # adapted weights (each has an A and a B)
    base_sha256: str  # empty when the file does not say (made by another tool)


def gguf_tensor_name(peft_key: str) -> tuple[str, str]:
    """llama.cpp's name of the weight a peft key adapts, and which half it is: ("blk.3.attn_q.weight", "a")."""
    match = _PEFT_KEY.search(peft_key)
    if match is None or match.group(2) not in GGUF_TARGETS:
        raise AdapterError(f"The adapter has a weight Hearth cannot place: {peft_key}.", "Tune with Hearth's targets.")
    block, layer, half = match.groups()
    return f"blk.{block}.{GGUF_TARGETS[layer]}.weight", half.lower()


def llama_rows(weights: np.ndarray, heads: int) -> np.ndarray:
    """Rows of a query or key output projection in llama.cpp's order: within each head, the first and second
    halves of the rotary dimensions interleaved pairwise (the inverse of what transformers does on load)."""
    rows = weights.shape[0]
    half = rows // heads // 2
    return weights.reshape(heads, 2, half, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def write_adapter(
    path: Path,
    architecture: str,
    tensors: Mapping[str, np.ndarray],
    alpha: float,
    head_count: int,
    head_count_kv: int,
    metadata: Mapping[str, str],
) -> None:
    """Write peft's adapter tensors (``get_peft_model_state_dict``) as a llama.cpp LoRA GGUF at ``path``, through a
    temporary file so a crash or a full disk never leaves half an adapter under the real name."""
    import gguf
    import numpy as np

    if architecture not in TUNABLE_ARCHITECTURES:
        raise AdapterError(
            f"Hearth cannot export adapters for {architecture} models.",
            f"Tune a model of one of these architectures: {', '.join(TUNABLE_ARCHITECTURES)}.",
        )
    partial = path.with_name(path.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), architecture)
    try:
        writer.add_string("general.type", "adapter")
        writer.add_string("adapter.type", "lora")
        writer.add_float32("adapter.lora.alpha", float(alpha))
        for key, value in metadata.items():
            writer.add_string(key, value)
        for key, weights in sorted(tensors.items()):
            name, half = gguf_tensor_name(key)
            array = np.asarray(weights, dtype=np.float32)
            if architecture == "llama" and half == "b" and ".attn_q." in name:
                array = llama_rows(array, head_count)
            elif architecture == "llama" and half == "b" and ".attn_k." in name:
                array = llama_rows(array, head_count_kv)
            writer.add_tensor(f"{name}.lora_{half}", np.ascontiguousarray(array))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        partial.replace(path)
    except BaseException:
        writer.close()
        partial.unlink(missing_ok=True)
        raise


def check_adapter(path: Path, base: ModelInfo) -> AdapterFacts:
    """The adapter's facts once it is known to fit ``base``, or :class:`AdapterError` saying why it does not.

    Read with Hearth's bounded GGUF reader: an adapter file is as untrusted as a model file."""
    try:
        header = read_header(path)
        base_tensors = {t.name: t.shape for t in read_header(base.path).tensors}
    except ModelFileError as exc:
        raise AdapterError(f"The adapter {path.name} cannot be read: {exc.message}", _REMEDY) from None
    meta = header.metadata
    kind, adapter_kind = meta.get("general.type"), meta.get("adapter.type")
    if kind != "adapter" or adapter_kind != "lora":
        shown = f"general.type is {kind!r}" if kind != "adapter" else f"adapter.type is {adapter_kind!r}"
        raise AdapterError(f"{path.name} is not a LoRA adapter ({shown}).", _REMEDY)
    architecture = meta.get("general.architecture")
    if architecture != base.architecture:
        raise AdapterError(
            f"{path.name} was made for a {architecture} model; {base.path.name} is {base.architecture}.",
            "Use it with the model it was trained for, or tune this model.",
        )
    alpha = meta.get("adapter.lora.alpha")
    if not isinstance(alpha, int | float) or not alpha > 0:
        raise AdapterError(f"{path.name} has no usable adapter.lora.alpha.", _REMEDY)
    shapes = {t.name: t.shape for t in header.tensors}
    ranks: set[int] = set()
    for name, shape_a in shapes.items():
        if not name.endswith(".lora_a"):
            if not name.endswith(".lora_b"):
                raise AdapterError(f"{path.name} holds {name}, which is not a LoRA tensor.", _REMEDY)
            continue
        weight = name.removesuffix(".lora_a")
        shape_b = shapes.get(f"{weight}.lora_b")
        target = base_tensors.get(weight)
        if shape_b is None:
            raise AdapterError(f"{path.name} has {name} without its lora_b.", _REMEDY)
        if target is None:
            raise AdapterError(f"{path.name} adapts {weight}, which {base.path.name} does not have.", _FOR_ANOTHER)
        # ggml order: A is (in, rank), B is (rank, out), the weight (in, out).
        if len(shape_a) != 2 or len(shape_b) != 2:
            raise AdapterError(f"{path.name}'s {weight} pair is not two matrices.", _REMEDY)
        if shape_a[1] != shape_b[0] or (shape_a[0], shape_b[1]) != target:
            raise AdapterError(
                f"{path.name}'s {weight} is {shape_a[0]}x{shape_b[1]} but {base.path.name}'s is "
                f"{'x'.join(map(str, target))}.",
                _FOR_ANOTHER,
            )
        ranks.add(shape_a[1])
    pairs = sum(1 for name in shapes if name.endswith(".lora_a"))
    if pairs == 0 or pairs * 2 != len(shapes):
        raise AdapterError(f"{path.name} holds no complete LoRA pairs.", _REMEDY)
    base_sha = meta.get(BASE_SHA_KEY)
    base_sha = base_sha if isinstance(base_sha, str) else ""
    return AdapterFacts(str(architecture), float(alpha), max(ranks), pairs, base_sha)


_REMEDY = "Use an adapter made by `hearth tune` (or llama.cpp's convert_lora_to_gguf.py)."
_FOR_ANOTHER = "It was trained for another base model: use it with that model, or tune this one."
