"""Excerpts with the real embedding model (all-MiniLM-L6-v2): a question in a user's own words, whose answer is in
the fourth passage of the ranking, gets that passage's answering sentences in the room of the first passage alone."""

from __future__ import annotations

import pytest

from app.services.answering.sources import excerpts_of
from rag.prompt import Candidate
from rag.retrieval.embeddings import Embedder

pytestmark = pytest.mark.integration

RANKED = [
    Candidate(
        "/docs/bash.pdf",
        71,
        "The Set Builtin",
        "This builtin is so complicated that it deserves its own section. set allows you to change the values of "
        "shell options and set the positional parameters, or to display the names and values of shell variables. "
        "If no options or arguments are supplied, set displays the names and values of all shell variables and "
        "functions, sorted according to the current locale, in a format that may be reused as input.",
    ),
    Candidate(
        "/docs/bash.pdf",
        72,
        "The Set Builtin",
        "-a Each variable or function that is created or modified is given the export attribute and marked for "
        "export to the environment of subsequent commands. -b Cause the status of terminated background jobs to be "
        "reported immediately, rather than before printing the next primary prompt.",
    ),
    Candidate(
        "/docs/bash.pdf",
        40,
        "Shell Functions",
        "Shell functions are a way to group commands for later execution using a single name for the group. They "
        "are executed just like a regular command.",
    ),
    Candidate(
        "/docs/bash.pdf",
        73,
        "The Set Builtin",
        "-C Prevent output redirection using '>' from overwriting existing files.\n"
        "-e Exit immediately if a pipeline, which may consist of a single simple command, returns a non-zero "
        "status. The shell does not exit if the command that fails is part of the command list immediately "
        "following a while or until keyword.\n"
        "-f Disable filename expansion (globbing).",
    ),
]


def test_the_answer_in_the_fourth_passage_is_given_in_the_room_of_the_first(
    embedder: Embedder,
) -> None:
    question = "How do I make a script stop as soon as one of its commands fails?"
    given = excerpts_of(embedder, question, RANKED, 1, embedder.count_tokens)
    assert len(given) <= 3  # at most two passages more than the one whose room they share
    texts = [c.text for c in given]
    assert any("Exit immediately if a pipeline" in text for text in texts)
    page_of = {c.text: c.page for c in given}
    assert next(page_of[t] for t in texts if "Exit immediately" in t) == 73  # the excerpt keeps its page
    used = sum(embedder.count_tokens(text.replace("…", "")) for text in texts)
    assert used <= embedder.count_tokens(RANKED[0].text) + 2 * len(given)  # the room of one passage (the gaps aside)
