"""An answer none of whose own terms the passages hold is not presented as coming from them.

The rule is lexical and narrow: a citing answer's distinctive terms are its words and symbols that are not in the
question and not common English (``rag.citations.COMMON``); when it has two or more and no passage given holds any
of them (a plural "s" dropped), the answer did not come from the passages, whatever it cites. Measured on the saved
answers of the user's-words set (``bench/answer_self_check.py --no-model``): it fires on few wrong answers (1 of
22 on the tuning half; wrong answers mostly copy words of a wrong passage, which no lexical rule can see) and on
none of the right ones; it is kept because when it fires the citation is certainly not support.

Pure: no model, no store. ``app.services.answering.documents_turn.final_answer`` applies it after the citations are
checked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rag.citations import COMMON, terms_of
from rag.prompt import CITATION_MARKER, Source

# With one term it also flagged a right answer (a made-up function name around the right one, "glp_mpl_normal01"
# for "Normal01"; bench/data/debian-manuals-lexical-check.min-terms-1.qwen2.5-coder-1.5b.json).
MIN_TERMS = 2


@dataclass(frozen=True)
class Unsupported:
    """The answer's distinctive terms, none of which a passage given holds."""

    terms: tuple[str, ...]

    @property
    def words(self) -> str:
        return f"Not found in the documents: no passage given mentions {_listed(self.terms)}; citations taken off."


def unsupported(
    answer: str, question: str, sources: Sequence[Source], min_terms: int = MIN_TERMS
) -> Unsupported | None:
    """What shows that ``answer`` does not come from the ``sources`` it cites, or None: when it cites none (an answer
    that says the passages do not hold it cites nothing), when a passage holds one of its terms, or when it has fewer
    than two of its own."""
    if not sources or not CITATION_MARKER.search(answer):
        return None
    asked = terms_of(question)
    terms = {t for t in terms_of(answer) if t not in asked and t not in COMMON}
    if len(terms) < min_terms:
        return None
    held = " ".join(" ".join(s.text for s in sources).split()).casefold()
    if any(t.rstrip("s") in held for t in terms):  # the stem, so "pipelines" is held by "pipeline"
        return None
    return Unsupported(tuple(sorted(terms)))


def not_found_answer(answer: str, found: Unsupported) -> str:
    """``answer`` said to be unsupported, first, and without citation markers, so no page is named for it."""
    bare = re.sub(r"[ \t]+([.,;:!?])", r"\1", CITATION_MARKER.sub("", answer))
    bare = re.sub(r"[ \t]{2,}", " ", bare).strip()
    lead = f"I could not find this in the documents: no passage mentions {_listed(found.terms)}."
    return f"{lead}\n\nWithout a source, and possibly wrong: {bare}" if bare else lead


def _listed(terms: Sequence[str], most: int = 3) -> str:
    quoted = [f"“{t}”" for t in terms[:most]]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]
