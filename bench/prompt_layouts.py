"""Answer an answer set with another layout of the documents prompt, through ``hearth eval
answers`` itself: the same retrieval, model, follow-up and citation check; only the user's turn differs.

Layouts (each a change to :func:`rag.prompt.rag_question`, which every front end's prompt goes through):

* ``today``: the passages, the question, then how to answer (the product's own);
* ``ask-first``: the question also before the passages ("Question: …" at the top), so the model reads them for it;
* ``best-last``: the passages in reverse order, the best-ranked nearest the question (numbers unchanged);
* ``short``: the shortest format instruction ("Answer in one sentence and cite the passage like [n].");
* ``previous-question``: a follow-up's question line preceded by the question before it ("Previous question: …"),
  so that "And Adelaide?" carries what was asked about Perth;
* ``oracle``: only the passages found that hold the question's expected answer (all of them when none does), read
  from the set itself. Not a way to answer: the ceiling of choosing the passage to read among those found, which
  says whether a narrow reading is worth a chooser (with ``HEARTH_RAG__TOP_K=8`` for a wide recall);
* ``likely-2``: the two passages found after which a scoring model (``HEARTH_BENCH_SCORER``, a GGUF; the embedded
  SmolLM2-135M by default) finds the question most likely (``bench/question_likelihood.py``), in the ranking's
  order: a chooser that does not know the answer;
* ``ranked-2-likely-1``: the ranking's first two passages and the scoring model's likeliest one (two or three
  passages, in the ranking's order): the ranking kept, and the passage it ranked lower given when the scorer
  prefers it.

    HEARTH_HOME=~/.cache/hearth-bench/uw-home .venv/bin/python bench/prompt_layouts.py best-last -- \\
        bench/data/user-words-answers.jsonl -c uw --part tuning --model MODEL.gguf --output FILE

Everything after ``--`` goes to ``hearth eval answers``. Nothing here is used by the product.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from backends.base import ChatMessage
from rag import prompt
from rag.prompt import Source

SHORT_INSTRUCTION = "Answer in one sentence and cite the passage like [n]."


def _ask_first(question: str, sources: Sequence[Source], above: Sequence[int] = ()) -> str:
    if not sources and not above:
        return prompt.rag_question(question, sources, above)
    return f"Question: {question}\n\n" + prompt.rag_question(question, sources, above)


def _best_last(question: str, sources: Sequence[Source], above: Sequence[int] = ()) -> str:
    return prompt.rag_question(question, list(reversed(sources)), above)


def _short(question: str, sources: Sequence[Source], above: Sequence[int] = ()) -> str:
    text = prompt.rag_question(question, sources, above)
    if not sources and not above:
        return text
    head, _, _ = text.rpartition(f"\n\nQuestion: {question}\n")
    return f"{head}\n\nQuestion: {question}\n{SHORT_INSTRUCTION}"


# Each turn's question: the question before it in the conversation (set as the prompt's turns are laid out).
_previous: dict[str, str] = {}


def _previous_question(question: str, sources: Sequence[Source], above: Sequence[int] = ()) -> str:
    text = prompt.rag_question(question, sources, above)
    before = _previous.get(question)
    if before is None:
        return text
    head, asked, tail = text.rpartition(f"Question: {question}")
    return f"{head}Previous question: {' '.join(before.split())}\n{asked}{tail}"


# The expected answers of the set being asked, by question (set by main for the oracle layout).
_expected: dict[str, list[list[str]]] = {}


def _oracle(question: str, sources: Sequence[Source], above: Sequence[int] = ()) -> str:
    from rag.answer_eval import holds_expected

    wanted = _expected.get(question)
    holding = [s for s in sources if wanted and holds_expected(s.text, wanted)]
    return prompt.rag_question(question, holding or sources, above)


_scorer: list[Any] = []  # the scoring model and bench/question_likelihood.py, loaded once at the first question


def _likelihood_order(question: str, sources: Sequence[Source]) -> list[int]:
    """The indexes of ``sources``, the one after which the scoring model finds ``question`` likeliest first."""
    if not _scorer:
        import importlib.util
        import os
        from pathlib import Path

        from backends.llamacpp.buffers import open_llama  # the product's buffer rule (AMX CPUs)
        from models.embedded import embedded_chat_model

        here = Path(__file__).resolve().parent
        spec = importlib.util.spec_from_file_location("question_likelihood", here / "question_likelihood.py")
        assert spec is not None and spec.loader is not None
        scoring = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(scoring)
        path = os.environ.get("HEARTH_BENCH_SCORER") or str(embedded_chat_model())
        _scorer.extend([open_llama(model_path=path, n_ctx=1024, n_threads=2, logits_all=True, verbose=False), scoring])
    model, scoring = _scorer
    scores = [scoring.question_log_probability(model, s.text, question) for s in sources]
    return sorted(range(len(sources)), key=lambda i: -scores[i])


def _likely_two(question: str, sources: Sequence[Source], above: Sequence[int] = ()) -> str:
    if len(sources) <= 2:
        return prompt.rag_question(question, sources, above)
    best = sorted(_likelihood_order(question, sources)[:2])
    return prompt.rag_question(question, [sources[i] for i in best], above)


def _ranked_two_likely_one(question: str, sources: Sequence[Source], above: Sequence[int] = ()) -> str:
    if len(sources) <= 2:
        return prompt.rag_question(question, sources, above)
    chosen = sorted({0, 1, _likelihood_order(question, sources)[0]})
    return prompt.rag_question(question, [sources[i] for i in chosen], above)


LAYOUTS: dict[str, Callable[..., str]] = {
    "today": prompt.rag_question,  # use_layout replaces the name where it is imported, not in rag.prompt
    "ask-first": _ask_first,
    "best-last": _best_last,
    "short": _short,
    "previous-question": _previous_question,
    "oracle": _oracle,
    "likely-2": _likely_two,
    "ranked-2-likely-1": _ranked_two_likely_one,
}


def use_layout(name: str) -> None:
    """Make every documents prompt of this process use layout ``name``."""
    from app.services.answering import documents_prompt, documents_turn, sources

    layout = LAYOUTS[name]
    for module in (documents_prompt, documents_turn, sources):
        module.rag_question = layout  # type: ignore[attr-defined]
    if name == "previous-question":
        lay_out = documents_prompt.turn_messages

        def remembering(system_prompt: str, turns: Sequence[documents_prompt.DocumentsTurn]) -> list[ChatMessage]:
            _previous.clear()
            _previous.update({turn.question: turns[i - 1].question for i, turn in enumerate(turns) if i})
            return lay_out(system_prompt, turns)

        documents_prompt.turn_messages = remembering  # type: ignore[assignment]


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2 or argv[0] not in LAYOUTS or argv[1] != "--":
        print(f"usage: prompt_layouts.py {{{'|'.join(LAYOUTS)}}} -- EVAL_ANSWERS_ARGS...", file=sys.stderr)
        return 2
    use_layout(argv[0])
    if argv[0] == "oracle":
        from pathlib import Path

        from rag.answer_eval import read_answer_questions

        asked = read_answer_questions(Path(argv[2]))
        _expected.update({q.question: [list(item) for item in q.expected] for q in asked})
    from app.cli.main import main as hearth

    return hearth(["eval", "answers", *argv[2:]])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
