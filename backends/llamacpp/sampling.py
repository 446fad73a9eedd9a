"""Sampler chains for llama.cpp: which steps in which order (pure, :func:`sampler_steps`), and one native chain
per answer (:class:`SamplerChain`), so concurrent answers never share penalty history or random state."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from backends.base import GenerationParams, Grammar
from backends.grammar import new_grammar_sampler

# The window the repeat penalty looks back over (llama.cpp's and llama-cpp-python's default).
PENALTY_LAST_N = 64
TOP_K = 40
MIN_P = 0.05
UINT32_MASK = 0xFFFFFFFF
# llama.cpp reads this seed as "pick one at random"; a user's seed must never land on it by accident.
LLAMA_RANDOM_SEED = 0xFFFFFFFF

StepKind = Literal["penalties", "top_k", "top_p", "min_p", "temp", "dist", "greedy"]


@dataclass(frozen=True)
class SamplerStep:
    kind: StepKind
    value: float = 0.0


def sampler_steps(params: GenerationParams, fresh_seed: int) -> tuple[SamplerStep, ...]:
    """The chain for ``params``: repeat penalty over the last tokens, then either the most likely token
    (temperature 0) or top-k, top-p, min-p, temperature and a seeded draw. ``fresh_seed`` is used when the
    request names no seed."""
    penalties = SamplerStep("penalties", params.repeat_penalty)
    if params.temperature <= 0.0:
        return (penalties, SamplerStep("greedy"))
    seed = (params.seed if params.seed is not None else fresh_seed) & UINT32_MASK
    if seed == LLAMA_RANDOM_SEED:
        seed -= 1
    return (
        penalties,
        SamplerStep("top_k", TOP_K),
        SamplerStep("top_p", params.top_p),
        SamplerStep("min_p", MIN_P),
        SamplerStep("temp", params.temperature),
        SamplerStep("dist", seed),
    )


class SamplerChain:
    """A native llama.cpp sampler chain. Not thread-safe: the scheduler thread alone uses it.

    With a ``grammar`` (which needs the model's ``vocab``), its sampler sits right after the repeat penalty, before
    any step that keeps or draws tokens, so only tokens the grammar allows are ever drawn. The end of the prompt is
    shown to the penalty alone: the grammar follows the answer, from its first token."""

    def __init__(
        self, steps: Sequence[SamplerStep], vocab_size: int, grammar: Grammar | None = None, vocab: Any = None
    ) -> None:
        import llama_cpp

        self._chain: Any = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        self._penalties: Any = None
        grammar_sampler = new_grammar_sampler(vocab, grammar) if grammar is not None else None
        for step in steps:
            if grammar_sampler is not None and step.kind != "penalties":
                llama_cpp.llama_sampler_chain_add(self._chain, grammar_sampler)
                grammar_sampler = None
            native = _native_step(step, vocab_size)
            # The chain owns what is added to it and frees it with itself.
            llama_cpp.llama_sampler_chain_add(self._chain, native)
            if step.kind == "penalties":
                self._penalties = native

    def accept(self, tokens: Sequence[int]) -> None:
        """Let the penalty see tokens that were not sampled here (the end of the prompt)."""
        import llama_cpp

        for token in tokens:
            llama_cpp.llama_sampler_accept(self._penalties if self._penalties is not None else self._chain, token)

    def sample(self, ctx: Any, batch_index: int) -> int:
        """Draw from the logits of batch row ``batch_index`` of the last decode; the token is also accepted."""
        import llama_cpp

        return int(llama_cpp.llama_sampler_sample(self._chain, ctx, ctypes.c_int32(batch_index)))

    def close(self) -> None:
        import llama_cpp

        if self._chain is not None:
            llama_cpp.llama_sampler_free(self._chain)
            self._chain = None


def _native_step(step: SamplerStep, vocab_size: int) -> Any:
    import llama_cpp

    match step.kind:
        case "penalties":
            return llama_cpp.llama_sampler_init_penalties(vocab_size, PENALTY_LAST_N, step.value, 0.0, 0.0)
        case "top_k":
            return llama_cpp.llama_sampler_init_top_k(int(step.value))
        case "top_p":
            return llama_cpp.llama_sampler_init_top_p(step.value, 1)
        case "min_p":
            return llama_cpp.llama_sampler_init_min_p(step.value, 1)
        case "temp":
            return llama_cpp.llama_sampler_init_temp(step.value)
        case "dist":
            return llama_cpp.llama_sampler_init_dist(int(step.value))
        case "greedy":
            return llama_cpp.llama_sampler_init_greedy()
