"""What Hearth knows about a GGUF model, read from its validated header."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.gguf_reader import (
    GGUFHeader,
    SkippedArray,
    TensorEntry,
    metadata_getter,
    read_header,
    read_integers,
    read_strings,
)
from models.gguf_split import MAX_PARTS, split_name, without_split
from models.shared.errors import ModelFileError

_BLOCK = re.compile(r"blk\.(\d+)\.")

# Upper bounds a real model never reaches; larger values are corrupt or hostile metadata.
MAX_LAYERS = 4096
MAX_CONTEXT = 16_777_216
MAX_HEADS = 65_536
MAX_EMBEDDING = 1_048_576


@dataclass(frozen=True)
class ModelInfo:
    path: Path
    file_size_bytes: int
    gguf_version: int
    architecture: str
    name: str
    quantization: str
    parameter_count: int
    trained_context_length: int
    block_count: int
    embedding_length: int
    head_count: int
    head_count_kv: int
    head_dim_k: int
    head_dim_v: int
    vocab_size: int
    chat_template: str | None
    bos_token: str
    eos_token: str
    add_bos_token: bool
    license: str | None
    # Weight bytes of each repeating block (blk.N.*), and of everything else (embeddings, output, norms).
    layer_bytes: tuple[int, ...] = ()
    other_bytes: int = 0
    output_bytes: int = 0  # the output projection (or the tied embedding it reuses), which runs on the last device
    output_tied: bool = False  # no output projection of its own: it reuses the token embedding
    tensor_types: frozenset[str] = frozenset()  # ggml types of the weights, e.g. {"Q4_K", "Q6_K", "F32"}
    parts: int = 1  # files the model is split into (``path`` is the first)

    @property
    def weights_bytes(self) -> int:
        return sum(self.layer_bytes) + self.other_bytes if self.layer_bytes else self.file_size_bytes

    @property
    def display_name(self) -> str:
        return f"{self.name} ({self.quantization})"


def read_model_info(path: Path) -> ModelInfo:
    """Validate the GGUF at ``path`` and extract what selection, memory planning and chat need. For a model split
    into several files, ``path`` is its first part: every other part is read and checked too, and the sizes and
    weights are the whole model's."""
    header = read_header(path)
    others = other_parts(path, header)
    tensors = [*header.tensors, *(tensor for part in others for tensor in part.tensors)]
    file_size = header.file_size_bytes + sum(part.file_size_bytes for part in others)
    get = metadata_getter(header.metadata, path)
    arch = get("general.architecture", str)
    if not arch:
        raise ModelFileError(
            f"{path.name} does not say which architecture it is (general.architecture is missing).",
            "Re-convert the model with a current llama.cpp, or pick another GGUF file.",
        )

    def bounded(key: str, upper: int, default: int | None = None) -> int:
        value = get(f"{arch}.{key}", int, default)
        if value is None:
            raise ModelFileError(
                f"{path.name} is missing {arch}.{key}.", "Re-convert the model with a current llama.cpp."
            )
        if not 0 < value <= upper:
            raise ModelFileError(
                f"{path.name} is not a valid GGUF file: {arch}.{key} = {value} is out of range.",
                "Download the model again, or pick another GGUF file.",
            )
        return int(value)

    block_count = bounded("block_count", MAX_LAYERS)
    embedding = bounded("embedding_length", MAX_EMBEDDING)
    heads = bounded("attention.head_count", MAX_HEADS)
    heads_kv = bounded("attention.head_count_kv", MAX_HEADS, heads)
    head_dim_k = bounded("attention.key_length", MAX_EMBEDDING, max(embedding // heads, 1))
    head_dim_v = bounded("attention.value_length", MAX_EMBEDDING, head_dim_k)
    trained_ctx = bounded("context_length", MAX_CONTEXT)

    quantization = _quantization_label(get("general.file_type", int))
    tokens = header.metadata.get("tokenizer.ggml.tokens")
    if not (isinstance(tokens, SkippedArray) and tokens.of_strings):
        tokens = SkippedArray(0, 0, 0)
    bos_id = get("tokenizer.ggml.bos_token_id", int)
    eos_id = get("tokenizer.ggml.eos_token_id", int)
    # The vocabulary is not kept; only the two tokens the chat template needs are read from the file.
    special = read_strings(path, tokens, [i for i in (bos_id, eos_id) if i is not None])
    return ModelInfo(
        path=path,
        file_size_bytes=file_size,
        gguf_version=header.version,
        architecture=arch,
        name=model_name(path, file_size, quantization),
        quantization=quantization,
        parameter_count=sum(_elements(t.shape) for t in tensors),
        trained_context_length=trained_ctx,
        block_count=block_count,
        embedding_length=embedding,
        head_count=heads,
        head_count_kv=heads_kv,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        vocab_size=len(tokens),
        chat_template=get("tokenizer.chat_template", str),
        bos_token=special.get(bos_id, "") if bos_id is not None else "",
        eos_token=special.get(eos_id, "") if eos_id is not None else "",
        add_bos_token=bool(get("tokenizer.ggml.add_bos_token", bool, False)),
        license=get("general.license", str),
        **_tensor_facts(tensors, block_count),
        parts=1 + len(others),
    )


def other_parts(path: Path, header: GGUFHeader) -> list[GGUFHeader]:
    """The headers of the other parts of a split model whose first part is ``path`` (llama.cpp's ``split.no`` and
    ``split.count``, and its names for the parts), each read and checked; empty for a model in one file. A part
    other than the first, a part missing, or a part of another model is refused with what to do."""
    get = metadata_getter(header.metadata, path)
    count = get("split.count", int, 0)
    if count <= 1:
        return []
    number = get("split.no", int, 0)
    named = split_name(path.name)
    if count > MAX_PARTS:
        raise ModelFileError(
            f"{path.name} says its model is split into {count} files; Hearth reads at most {MAX_PARTS}.",
            "Merge the parts into fewer files with llama.cpp's llama-gguf-split --merge, then add that file.",
            page_remedy="Merge the parts into one file with llama.cpp's gguf-split tool, then import that file.",
        )
    if number != 0 or named is None or named.number != 1 or named.count != count:
        first = f"{named.prefix}-00001-of-{count:05d}.gguf" if named is not None else f"…-00001-of-{count:05d}.gguf"
        raise ModelFileError(
            f"{path.name} is part {number + 1} of a model split into {count} files.",
            f"Add the model by its first part, {first}, with the other parts in the same folder.",
        )
    parts = []
    for number in range(2, count + 1):
        part = path.with_name(named.part(number))
        if not part.is_file():
            raise ModelFileError(
                f"{path.name} is the first of {count} parts of one model, and part {number}, {part.name}, is not "
                "in the same folder.",
                "Put every part of the model in one folder with the names they were published with, then try again.",
            )
        read = read_header(part)
        said = metadata_getter(read.metadata, part)
        if said("split.no", int, -1) != number - 1 or said("split.count", int, 0) != count:
            raise ModelFileError(
                f"{part.name} is not part {number} of {count} of the model whose first part is {path.name}.",
                "Download the model's parts again, all from the same repository.",
            )
        parts.append(read)
    return parts


def model_files(path: Path) -> list[Path]:
    """Every file of the model at ``path``: the file itself, or each part of a split model from its first."""
    named = split_name(path.name)
    if named is None or named.number != 1:
        return [path]
    return [path.with_name(name) for name in named.parts]


# llama.cpp's token types (llama_token_type): the tokens a prompt read with special tokens recognised makes of text.
_CONTROL = 3
_USER_DEFINED = 4


def special_token_texts(path: Path) -> list[str]:
    """The texts of the vocabulary's control and user-defined tokens (``<|im_start|>``, ``<tool_call>``), read from
    the GGUF at ``path``: what text from outside must not spell out when a backend other than llama.cpp (which lists
    them from its own vocabulary) renders a prompt. Empty when the file lists no token types."""
    header = read_header(path)
    tokens, types = header.metadata.get("tokenizer.ggml.tokens"), header.metadata.get("tokenizer.ggml.token_type")
    if not (isinstance(tokens, SkippedArray) and tokens.of_strings):
        return []
    if isinstance(types, SkippedArray):
        kinds = read_integers(path, types)
    elif isinstance(types, list):  # a vocabulary short enough to have been decoded with the header
        kinds = [int(kind) for kind in types]
    else:
        return []
    wanted = [index for index, kind in enumerate(kinds[: len(tokens)]) if kind in (_CONTROL, _USER_DEFINED)]
    return [text for _, text in sorted(read_strings(path, tokens, wanted).items())]


def _tensor_facts(tensors: Sequence[TensorEntry], block_count: int) -> dict[str, Any]:
    from gguf import GGMLQuantizationType

    layers = [0] * block_count
    other = output = 0
    types: set[str] = set()
    for tensor in tensors:
        try:
            types.add(GGMLQuantizationType(tensor.ggml_type).name)
        except ValueError:
            types.add(f"type {tensor.ggml_type}")
        match = _BLOCK.match(tensor.name)
        if match and int(match.group(1)) < block_count:
            layers[int(match.group(1))] += tensor.n_bytes
            continue
        other += tensor.n_bytes
        if tensor.name == "output.weight":
            output = tensor.n_bytes
    tied = output == 0
    if tied:  # tied embeddings: the output projection reuses the token embedding
        output = next((t.n_bytes for t in tensors if t.name == "token_embd.weight"), 0)
    return {
        "layer_bytes": tuple(layers),
        "other_bytes": other,
        "output_bytes": output,
        "output_tied": tied,
        "tensor_types": frozenset(types),
    }


def sha256_of(path: Path, chunk_bytes: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def _elements(shape: tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def model_name(path: Path, size: int, quantization: str) -> str:
    """How a model file is named wherever it is shown: a packaged model's own name, else its file's."""
    return _packaged_name(path, size) or display_name(path, quantization)


def _packaged_name(path: Path, size: int) -> str | None:
    """The name of the packaged model this file is (by its file name and size: no hashing), as the install list
    gives it, so one model has one name wherever it is shown; None for any other file."""
    from models.catalog import CATALOG  # the catalog reads files with this module

    for model in CATALOG.values():
        if model.file_name == path.name and model.size_bytes == size:
            return re.sub(r" \([^()]*\)$", "", model.title)  # the type is shown beside the name, as for any model
    return None


def display_name(path: Path, quantization: str) -> str:
    """The file name people recognise, without the quantization suffix that the label already shows (nor the part
    numbers of a split model's first part)."""
    stem = without_split(path.name).removesuffix(".gguf")
    match = re.search(rf"[.\-_]{re.escape(quantization)}$", stem, flags=re.IGNORECASE)
    return stem[: match.start()] if match and match.start() > 0 else stem


def _quantization_label(file_type: int | None) -> str:
    from gguf import LlamaFileType

    if file_type is None:
        return "unknown"
    try:
        return LlamaFileType(file_type).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except ValueError:
        return f"type {file_type}"
