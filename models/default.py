"""Which model Hearth chats with when the user has not chosen one: the best chat model installed that fits this
machine, by a quality order kept here as data. Pure: the caller lists the installed models with their facts and
fit, and says what the user chose, if anything.

The order names files by SHA-256, so a model counts whether it came from the package index, from disk or with
Hearth, and a copy the user made (quantized, converted) or a file Hearth knows nothing about is never picked on
the user's behalf: those run only when chosen. A model without a chat template (a base model such as Gemma 3
270M) is never the chat default. The embedded model is last in the order and is the fallback when nothing
better is installed, so a fresh install (and every test, with its empty data folder) chats with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Rule = Literal["flag", "choice", "best", "fallback"]

RULE_WORDS: dict[Rule, str] = {
    "flag": "given with --model",
    "choice": "your choice",
    "best": "default: best installed model that fits",
    "fallback": "default: the embedded model (no better installed model fits)",
}


@dataclass(frozen=True)
class RankedModel:
    sha256: str
    name: str


# Best first: how well each answers questions about the user's documents (measured with `hearth eval answers`).
CHAT_QUALITY: tuple[RankedModel, ...] = (
    RankedModel(
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", "Qwen2.5-Coder-1.5B-Instruct Q4_K_M"
    ),
    RankedModel(
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "Qwen2.5-Coder-0.5B-Instruct Q4_K_M"
    ),
    RankedModel(
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", "SmolLM2-135M-Instruct Q4_1 (embedded)"
    ),
)


@dataclass(frozen=True)
class Candidate:
    """An installed model as the choice sees it."""

    sha256: str
    path: Path
    has_chat_template: bool
    fits: bool  # runs here at the configured context, fully on the chosen device
    embedded: bool = False


@dataclass(frozen=True)
class StartPick:
    path: Path
    rule: Rule

    @property
    def why(self) -> str:
        return RULE_WORDS[self.rule]


def rank_of(sha256: str, ranking: Sequence[RankedModel] = CHAT_QUALITY) -> int | None:
    """The place of a file in the quality order (0 is best), or None if the order does not know it."""
    return next((index for index, ranked in enumerate(ranking) if ranked.sha256 == sha256), None)


def best_installed(candidates: Sequence[Candidate], ranking: Sequence[RankedModel] = CHAT_QUALITY) -> Candidate | None:
    """The best ranked chat model that fits; None when none does."""
    eligible = [
        (rank, c)
        for c in candidates
        if c.fits and c.has_chat_template and (rank := rank_of(c.sha256, ranking)) is not None
    ]
    return min(eligible, key=lambda pair: pair[0])[1] if eligible else None


def pick_start_model(
    candidates: Sequence[Candidate],
    chosen: Path | None = None,
    flag: Path | None = None,
    ranking: Sequence[RankedModel] = CHAT_QUALITY,
) -> StartPick | None:
    """The model to start with: the file given with --model, else the user's choice (``chosen``, a model they
    picked that still exists), else the best installed chat model that fits, else the embedded model. None only
    when there is no embedded model either."""
    if flag is not None:
        return StartPick(flag, "flag")
    if chosen is not None:
        return StartPick(chosen, "choice")
    best = best_installed(candidates, ranking)
    if best is not None:
        return StartPick(best.path, "best")
    embedded = next((c for c in candidates if c.embedded), None)
    return StartPick(embedded.path, "fallback") if embedded is not None else None
