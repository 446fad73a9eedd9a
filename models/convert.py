"""Convert a quantized GGUF back to full precision (F16 or F32) with the ``gguf`` package, so there is a source to
quantize from when only a quantized file exists (as for the embedded models). Dequantizing recovers no lost
precision; it only gives llama.cpp's quantizer something it may quantize again without stacking formats.

The file is checked by Hearth's own reader first, metadata is copied as is (file type updated), and the output
is written under a temporary name and renamed when complete.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from models.gguf import read_model_info
from models.shared.cancel import CancelToken
from models.shared.errors import HearthError

FILE_TYPES = {"F32": 0, "F16": 1}  # llama.cpp's general.file_type values
# Norms and other 1-D tensors stay F32, as llama.cpp's own converter writes them.
KEEP_F32_BELOW_DIMS = 2


class ConvertError(HearthError):
    """Conversion was refused or failed."""


def dequantize(source: Path, target: Path, to: str, cancel: CancelToken) -> Iterator[tuple[float, str]]:
    """Write ``target`` with every tensor of ``source`` in ``to`` (F16 or F32); yields (fraction, message)."""
    import gguf
    from gguf.constants import GGUFValueType

    if to not in FILE_TYPES:
        raise ConvertError(f"{to!r} is not a full-precision type.", "Use F16 or F32.")
    read_model_info(source)  # bounded, hostile-file checks before the gguf reader maps anything
    reader = gguf.GGUFReader(str(source))
    arch_field = reader.fields["general.architecture"]
    architecture = str(arch_field.contents())
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    writer = gguf.GGUFWriter(str(partial), architecture)
    try:
        for name, field in reader.fields.items():
            if name.startswith("GGUF.") or name == "general.architecture":
                continue
            if name == "general.file_type":
                writer.add_file_type(FILE_TYPES[to])
                continue
            value_type = GGUFValueType(field.types[0])
            sub_type = GGUFValueType(field.types[-1]) if value_type == GGUFValueType.ARRAY else None
            writer.add_key_value(name, field.contents(), value_type, sub_type)
        float_type = np.float16 if to == "F16" else np.float32
        total = len(reader.tensors)
        for index, tensor in enumerate(reader.tensors):
            if cancel.cancelled:
                raise ConvertError("Conversion was cancelled; nothing was saved.", "Start it again when you like.")
            values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
            keep = len(tensor.shape) < KEEP_F32_BELOW_DIMS or "norm" in tensor.name
            array = np.asarray(values, dtype=np.float32 if keep else float_type)
            writer.add_tensor(tensor.name, array.reshape(tuple(reversed([int(d) for d in tensor.shape]))))
            yield (index + 1) / (total + 1), f"Converting {tensor.name} ({index + 1}/{total})"
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        partial.replace(target)
    except (ValueError, NotImplementedError, OSError) as exc:
        raise ConvertError(f"Could not convert {source.name}: {exc}.", "Check free disk space, or try F32.") from exc
    finally:
        partial.unlink(missing_ok=True)
    yield 1.0, f"Wrote {target.name}"
