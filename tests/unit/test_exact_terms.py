"""Numbers, codes and identifiers are keyword terms as written and as parts; a passage holding every one of the
question's exact terms comes first in the fusion."""

from __future__ import annotations

import pytest

from rag.retrieval.bm25 import BM25Index, exact_terms, tokenize
from rag.retrieval.fusion import EXACT_WEIGHT, reciprocal_rank_fusion


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Ubuntu 6.06 LTS", ["ubuntu", "6.06", "6", "06", "lts"]),
        ("Python 3.11.2", ["python", "3.11.2", "3", "11", "2"]),
        ("lr=1e-5", ["lr", "1e-5", "1e5", "1e", "5"]),
        ("part XR-7742", ["part", "xr-7742", "xr7742", "xr", "7742"]),
        ("SHA-256 sums", ["sha-256", "sha256", "sha", "256", "sums"]),
        ("pip --no-deps", ["pip", "no-deps", "nodeps", "no", "deps"]),
        ("os.O_RDONLY", ["os.o_rdonly", "os", "o", "rdonly"]),
        ("json.dumps(obj, skipkeys=True)", ["json.dumps", "json", "dumps", "obj", "skipkeys", "true"]),
        ("JSONDecoder", ["jsondecoder", "json", "decoder"]),
    ],
)
def test_codes_are_tokens_whole_and_in_parts(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_exact_terms_are_numbers_codes_options_and_identifiers_not_plain_words() -> None:
    question = "Does --no-deps, json.dumps or O_RDONLY in JSONDecoder apply to 6.06 and XR-7742 built-in 3 ways?"
    assert exact_terms(question) == ["no-deps", "json.dumps", "o_rdonly", "jsondecoder", "6.06", "xr-7742"]
    assert exact_terms("What is the codename of the release?") == []


ROWS = [
    "version: 6.0; codename: Squeeze; series: squeeze",
    "version: 6.06 LTS; codename: Dapper Drake; series: dapper",
    "version: 6.10; codename: Edgy Eft; series: edgy",
    "version: 7; codename: Wheezy; series: wheezy",
]


def test_exact_matches_are_the_documents_holding_every_exact_term() -> None:
    index = BM25Index(ROWS)
    assert index.exact_matches("What is the codename of Ubuntu 6.06 LTS?") == [1]
    assert index.exact_matches("codename of 6.06 or 9.99") == [1]  # a term the collection lacks is ignored
    assert index.exact_matches("What is a codename?") == []
    assert index.exact_matches("codename 6.06", limit=0) == []  # too many holders single nothing out


def test_the_exact_ranking_outweighs_agreement_of_the_other_two() -> None:
    keyword = ["squeeze", "dapper", "edgy"]
    vector = ["squeeze", "edgy", "wheezy", "dapper"]
    plain = reciprocal_rank_fusion([keyword, vector])
    assert plain[0][0] == "squeeze"
    fused = reciprocal_rank_fusion([keyword, vector, ["dapper"]], weights=(1.0, 1.0, EXACT_WEIGHT))
    assert [item for item, _ in fused][:2] == ["dapper", "squeeze"]
    with pytest.raises(ValueError, match="2 weights for 3 rankings"):
        reciprocal_rank_fusion([keyword, vector, []], weights=(1.0, 1.0))
