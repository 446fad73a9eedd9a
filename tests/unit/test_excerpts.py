"""Excerpts (rag/excerpts.py): sentences, windows, the choice under a token budget, and the excerpt's text."""

from __future__ import annotations

from rag.excerpts import GAP, Window, choose, excerpt, sentences, windows

PASSAGES = [
    ["Alpha one.", "Alpha two.", "Alpha three.", "Alpha four."],
    ["Beta one.", "Beta two."],
    ["Gamma one.", "Gamma two.", "Gamma three."],
]


def words(text: str) -> int:
    return len(text.split())


def test_sentences_end_at_stops_colons_and_line_breaks() -> None:
    text = "set -e: Exit immediately if a command fails. Really? Yes!\n-u\tTreat unset variables as an error\n\n"
    assert sentences(text) == [
        "set -e:",
        "Exit immediately if a command fails.",
        "Really?",
        "Yes!",
        "-u\tTreat unset variables as an error",
    ]
    assert sentences("version 3.11 of Python") == ["version 3.11 of Python"]  # a dot inside a number is no end
    assert sentences("  \n ") == []


def test_windows_span_three_sentences_and_fewer_at_a_passage_end() -> None:
    found = windows(PASSAGES)
    assert [w for w in found if w.passage == 1] == [
        Window(1, 0, 2, "Beta one. Beta two."),
        Window(1, 1, 2, "Beta two."),
    ]
    assert found[0] == Window(0, 0, 3, "Alpha one. Alpha two. Alpha three.")
    assert len(found) == 4 + 2 + 3
    assert [(w.passage, w.first, w.last) for w in windows(PASSAGES, 2, stride=2)] == [
        (0, 0, 2),
        (0, 2, 4),
        (1, 0, 2),
        (2, 0, 2),
        (2, 2, 3),
    ]


def test_the_best_windows_are_taken_while_they_fit_and_their_passage_comes_first() -> None:
    found = windows(PASSAGES)
    similarity = [0.0] * len(found)
    best = next(i for i, w in enumerate(found) if w.passage == 2 and w.first == 1)  # "Gamma two. Gamma three."
    similarity[best] = 0.9
    chosen = choose(PASSAGES, found, similarity, words, budget=4, most_passages=3)
    # Gamma's window first (4 words); nothing else fits in 4 words.
    assert chosen == [(2, [1, 2])]
    chosen = choose(PASSAGES, found, similarity, words, budget=10, most_passages=3)
    assert chosen[0] == (2, [1, 2])
    assert sum(words(PASSAGES[p][k]) for p, ks in chosen for k in ks) <= 10


def test_equal_windows_go_by_the_ranking_and_the_passage_count_is_capped() -> None:
    found = windows(PASSAGES)
    same = [0.5] * len(found)
    assert choose(PASSAGES, found, same, words, budget=100, most_passages=1) == [(0, [0, 1, 2, 3])]
    everything = choose(PASSAGES, found, same, words, budget=100, most_passages=3)
    assert [p for p, _ in everything] == [0, 1, 2]  # the ranking's order breaks the tie


def test_an_excerpt_marks_where_sentences_were_left_out() -> None:
    said = PASSAGES[0]
    gap = GAP.strip()
    assert excerpt(said, [0, 1, 2, 3]) == "Alpha one. Alpha two. Alpha three. Alpha four."
    assert excerpt(said, [1, 2]) == f"{gap} Alpha two. Alpha three. {gap}"
    assert excerpt(said, [0, 3]) == f"Alpha one. {gap} Alpha four."
