"""Current chat models people run on AI PCs, as GGUF files on the Hugging Face Hub, from their makers or from
well-known GGUF publishers (llama.cpp's own ggml-org, LM Studio's community, bartowski, Unsloth). Pure data.

Each entry names one file, a 4-bit K-quant (Q4_K_M: the usual balance of size and quality), its size as the hub lists
it (rounded as the hub shows it; the install reads the exact size and SHA-256 from the hub's listing and checks the
bytes against them) and the model's licence. ``hearth models install KEY`` installs one; ``hearth models available``
lists them with whether each fits in the memory free now.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from models.hub import HubFile


@dataclass(frozen=True)
class HubModel:
    key: str
    title: str
    repo: str
    file_name: str
    size_bytes: int  # as the hub lists it
    parameters_b: float  # billions of parameters
    license: str
    note: str = ""  # what the licence or the model asks of the person, when more than an open licence

    @property
    def hub_file(self) -> HubFile:
        return HubFile(self.repo, self.file_name)

    @property
    def reference(self) -> str:
        return self.hub_file.reference


HUB_CATALOG: dict[str, HubModel] = {
    model.key: model
    for model in (
        HubModel(
            "qwen2.5-3b",
            "Qwen2.5-3B-Instruct",
            "lmstudio-community/Qwen2.5-3B-Instruct-GGUF",
            "Qwen2.5-3B-Instruct-Q4_K_M.gguf",
            1_930_000_000,
            3.1,
            "qwen-research",
            "Qwen's research licence: ask Qwen before commercial use.",
        ),
        HubModel(
            "llama-3.2-3b",
            "Llama 3.2 3B Instruct",
            "lmstudio-community/Llama-3.2-3B-Instruct-GGUF",
            "Llama-3.2-3B-Instruct-Q4_K_M.gguf",
            2_020_000_000,
            3.2,
            "llama3.2",
            "Meta's Llama 3.2 Community License.",
        ),
        HubModel(
            "gemma-3-4b",
            "Gemma 3 4B it",
            "ggml-org/gemma-3-4b-it-GGUF",
            "gemma-3-4b-it-Q4_K_M.gguf",
            2_490_000_000,
            3.9,
            "gemma",
            "Google's Gemma Terms of Use.",
        ),
        HubModel(
            "phi-4-mini",
            "Phi-4-mini-instruct",
            "bartowski/microsoft_Phi-4-mini-instruct-GGUF",
            "microsoft_Phi-4-mini-instruct-Q4_K_M.gguf",
            2_490_000_000,
            3.8,
            "mit",
        ),
        HubModel(
            "qwen3-4b-2507",
            "Qwen3-4B-Instruct-2507",
            "unsloth/Qwen3-4B-Instruct-2507-GGUF",
            "Qwen3-4B-Instruct-2507-Q4_K_M.gguf",
            2_500_000_000,
            4.0,
            "apache-2.0",
        ),
        HubModel(
            "qwen2.5-7b",
            "Qwen2.5-7B-Instruct",
            "bartowski/Qwen2.5-7B-Instruct-GGUF",
            "Qwen2.5-7B-Instruct-Q4_K_M.gguf",
            4_680_000_000,
            7.6,
            "apache-2.0",
        ),
    )
}


# A recommended model leaves at least half of the memory free now to the rest of the computer (the browser, the
# documents being read): a model that only just fits makes the whole computer slow.
ROOM_FOR_THE_REST = 0.5


def best_fitting(
    entries: Iterable[HubModel], ram_available_bytes: int, overhead: float, larger_than_bytes: int
) -> HubModel | None:
    """The curated model to recommend here: the one with the most parameters whose file, loaded (about
    ``overhead`` times its size), needs at most half the memory free now, when its file is larger than
    ``larger_than_bytes`` (the packaged default's); None when none is."""
    fitting = [
        entry
        for entry in entries
        if entry.size_bytes > larger_than_bytes
        and entry.size_bytes * overhead <= ram_available_bytes * ROOM_FOR_THE_REST
    ]
    return max(fitting, key=lambda entry: (entry.parameters_b, entry.size_bytes), default=None)
