"""Answer an answer set with another layout of the documents prompt (issue 35, item 3), through ``hearth eval
answers`` itself: the same retrieval, model, follow-up and citation check; only the user's turn differs.

Layouts (each a change to :func:`rag.prompt.rag_question`, which every front end's prompt goes through):

* ``today``: the passages, the question, then how to answer (the product's own);
* ``ask-first``: the question also before the passages ("Question: …" at the top), so the model reads them for it;
* ``best-last``: the passages in reverse order, the best-ranked nearest the question (numbers unchanged);
* ``short``: the shortest format instruction ("Answer in one sentence and cite the passage like [n].").

    HEARTH_HOME=~/.cache/hearth-bench/uw-home .venv/bin/python bench/prompt_layouts.py best-last -- \\
        bench/data/user-words-answers.jsonl -c uw --part tuning --model MODEL.gguf --output FILE

Everything after ``--`` goes to ``hearth eval answers``. Nothing here is used by the product.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

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


LAYOUTS: dict[str, Callable[..., str]] = {
    "today": prompt.rag_question,  # use_layout replaces the name where it is imported, not in rag.prompt
    "ask-first": _ask_first,
    "best-last": _best_last,
    "short": _short,
}


def use_layout(name: str) -> None:
    """Make every documents prompt of this process use layout ``name``."""
    from app.services.answering import documents_prompt, documents_turn, sources

    layout = LAYOUTS[name]
    for module in (documents_prompt, documents_turn, sources):
        module.rag_question = layout  # type: ignore[attr-defined]


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2 or argv[0] not in LAYOUTS or argv[1] != "--":
        print(f"usage: prompt_layouts.py {{{'|'.join(LAYOUTS)}}} -- EVAL_ANSWERS_ARGS...", file=sys.stderr)
        return 2
    use_layout(argv[0])
    from app.cli.main import main as hearth

    return hearth(["eval", "answers", *argv[2:]])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
