"""An answer from documents without the pieces of its own prompt that a small model writes back.

The embedded SmolLM2-135M often answers a documents question by writing the prompt's scaffolding on: it starts with
"Question: …" (the question again, reworded or not), then recites a passage, "Also for this question: passages [7]
above." and the next "Question: …" of a conversation it makes up. On the conversation set's tuning half 5 of its 23
answers began with "Question:" and 3 more wrote a part of the prompt back after their first line
(``bench/data/conversation-answers.tuning.today.smollm2-135m.json``). None of it is
an answer, and shown as one it reads as garbage.

The rule is narrow, so that an answer that merely mentions these words keeps them: a first line that is the
question written back ("Question: …", or the question word for word) is dropped, and the answer ends before the
first later line that opens a part of the prompt ("Question:", "Passages:", "Also for this question:", "For this
question:", or the format instruction). What is left may be nothing: :func:`echo_only` says so, and the caller says
that the model did not answer, instead of showing the echo.

Pure: no model, no store."""

from __future__ import annotations

import re

from rag.prompt import CITATION_MARKER

# The heads of the parts of rag.prompt.rag_question's user turn, as a line written back would begin.
PROMPT_PARTS = re.compile(
    r"^\s*(?:\*\*)?(?:question|passages|also for this question|for this question)(?:\*\*)?\s*:"
    r"|^\s*answer in one sentence from the passages",
    re.IGNORECASE,
)
ECHO_TAKEN_OFF = "Taken off the answer: parts of the question and passages that the model wrote back."
NOT_ANSWERED = (
    "The model did not answer from the passages: it wrote the question back instead. The passages it was given are "
    "listed below; a larger chat model answers such questions better (Models tab, or `hearth models available`)."
)


def without_prompt_echo(answer: str, question: str) -> str:
    """``answer`` without a first line that writes the question back, and cut before the first later line that
    opens a part of the prompt. An answer with neither comes back unchanged."""
    lines = answer.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    if first == len(lines):
        return answer
    start = first + 1 if _writes_question_back(lines[first], question) else first
    end = next((i for i in range(first + 1, len(lines)) if PROMPT_PARTS.match(lines[i])), len(lines))
    if start == first and end == len(lines):
        return answer
    return "\n".join(lines[start:end]).strip()


def echo_only(answer: str, question: str) -> bool:
    """Whether ``answer`` was nothing but the prompt written back: an echo was taken off and nothing of its own is
    left. An answer that is only a citation marker ("[1]") wrote nothing back: it points at a passage, which the
    turn asks the model to name (``rag.naming``)."""
    return _nothing_left(answer, without_prompt_echo(answer, question))


def taken_off(answer: str, question: str) -> tuple[str, str]:
    """``answer`` as it is kept, and the note that says what was taken off ("" when nothing was): without its
    echo, or :data:`NOT_ANSWERED` when the echo was all of it."""
    left = without_prompt_echo(answer, question)
    if left == answer:
        return answer, ""
    return (NOT_ANSWERED, NOT_ANSWERED) if _nothing_left(answer, left) else (left, ECHO_TAKEN_OFF)


def _nothing_left(answer: str, left: str) -> bool:
    return left != answer and not any(c.isalnum() for c in CITATION_MARKER.sub("", left))


def _writes_question_back(line: str, question: str) -> bool:
    """A line that opens with a part of the prompt, or the question word for word with no citation marker (with one,
    the answer points at a passage: the turn asks the model to name what it says, ``rag.naming``)."""
    if PROMPT_PARTS.match(line):
        return True
    return not CITATION_MARKER.search(line) and bool(_words(question)) and _words(line) == _words(question)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", CITATION_MARKER.sub(" ", text).casefold())
