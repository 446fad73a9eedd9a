"""Reading `hf:OWNER/REPO/FILE.gguf` and what a repository's listing says of one file (models/hub.py)."""

from __future__ import annotations

import pytest

from models.hub import (
    HubFacts,
    HubFile,
    HubFileRefused,
    HubNameInvalid,
    HubNotFound,
    facts_of,
    gguf_files,
    parse_reference,
    part_files,
    pick_file,
    quantization_of,
)

SHA = "a" * 64


@pytest.mark.parametrize(
    ("text", "repo", "filename"),
    [
        ("hf:bartowski/Qwen2.5-7B-Instruct-GGUF/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "bartowski/Qwen2.5-7B-Instruct-GGUF",
         "Qwen2.5-7B-Instruct-Q4_K_M.gguf"),
        ("  HF:unsloth/gemma-3-4b-it-GGUF/gemma-3-4b-it-Q4_K_M.GGUF ", "unsloth/gemma-3-4b-it-GGUF",
         "gemma-3-4b-it-Q4_K_M.GGUF"),
        ("hf:org/repo/Q4_K_M/model-Q4_K_M.gguf", "org/repo", "Q4_K_M/model-Q4_K_M.gguf"),  # a file in a folder
        ("hf:org/Model-GGUF", "org/Model-GGUF", ""),  # the repository alone: the file is picked
    ],
)  # fmt: skip
def test_a_hub_name_is_read_into_its_repository_and_file(text: str, repo: str, filename: str) -> None:
    assert parse_reference(text) == HubFile(repo, filename)
    assert parse_reference(text).reference == (f"hf:{repo}/{filename}" if filename else f"hf:{repo}")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("hf:owner", "does not name a repository or a file"),
        ("hf:owner//x.gguf", "does not name a repository or a file"),
        ("hf:-owner/repo/x.gguf", "is not a hub owner or repository name"),
        ("hf:owner/re po/x.gguf", "is not a hub owner or repository name"),
        ("hf:owner/repo/../../etc/passwd.gguf", "is not a file inside the repository"),
        ("hf:owner/repo/model.safetensors", "is not a GGUF file"),
        ("hf:owner/repo/model-Q4_K_M-00002-of-00003.gguf", "is part 2 of a model split into 3 files"),
    ],
)
def test_a_name_that_is_not_a_hub_file_is_refused_with_what_is_wrong(text: str, said: str) -> None:
    with pytest.raises(HubNameInvalid) as refused:
        parse_reference(text)
    assert said in refused.value.message
    assert refused.value.remedy


def test_the_listing_gives_the_size_and_sha256_or_names_the_files_there_are() -> None:
    wanted = HubFile("o/r", "m-Q4_K_M.gguf")
    listing = [
        {"rfilename": "README.md", "size": 10, "lfs": None},
        {"rfilename": "m-Q8_0.gguf", "size": 9, "lfs": {"sha256": SHA, "size": 900}},
        {"rfilename": "m-Q4_K_M.gguf", "size": 5, "lfs": {"sha256": SHA.upper(), "size": 500}},
    ]
    assert facts_of(wanted, listing) == HubFacts(500, SHA)
    with pytest.raises(HubNotFound) as missing:
        facts_of(HubFile("o/r", "m-Q2_K.gguf"), listing)
    assert missing.value.remedy == "Its GGUF files: m-Q4_K_M.gguf, m-Q8_0.gguf."
    with pytest.raises(HubFileRefused) as unchecked:  # no LFS SHA-256: its bytes could not be checked
        facts_of(HubFile("o/r", "README.gguf"), [{"rfilename": "README.gguf", "size": 10, "lfs": None}])
    assert "no SHA-256" in unchecked.value.message


@pytest.mark.parametrize(
    ("filename", "quantization"),
    [
        ("Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("gemma-3-4b-it-IQ4_XS.gguf", "IQ4_XS"),
        ("Phi-4-mini-instruct.Q8_0.gguf", "Q8_0"),
        ("Llama-3.2-3B-Instruct-f16.gguf", "F16"),
        ("model.BF16.gguf", "BF16"),
        ("Q5_K_S/Qwen3-4B-Q5_K_S.gguf", "Q5_K_S"),
        ("tiny.gguf", ""),
    ],
)
def test_the_quantization_is_read_from_the_file_name(filename: str, quantization: str) -> None:
    assert quantization_of(filename) == quantization


def test_a_listing_gives_its_models_smallest_first_a_split_one_as_its_first_part_with_the_whole_size() -> None:
    listing = [
        {"rfilename": "m-Q8_0.gguf", "size": 9, "lfs": {"sha256": SHA, "size": 900}},
        {"rfilename": "m-Q4_K_M.gguf", "size": 5, "lfs": {"sha256": SHA, "size": 500}},
        {"rfilename": "F16/m-F16-00002-of-00002.gguf", "size": 5, "lfs": {"sha256": SHA, "size": 1500}},
        {"rfilename": "F16/m-F16-00001-of-00002.gguf", "size": 5, "lfs": {"sha256": SHA, "size": 2000}},
        {"rfilename": "m-BF16-00001-of-00002.gguf", "size": 5, "lfs": {"sha256": SHA, "size": 2000}},  # no part 2
        {"rfilename": "README.md", "size": 10, "lfs": None},
        {"rfilename": "empty.gguf", "size": 0, "lfs": None},
    ]
    assert gguf_files(listing) == (
        ("m-Q4_K_M.gguf", 500),
        ("m-Q8_0.gguf", 900),
        ("F16/m-F16-00001-of-00002.gguf", 3500),
    )
    assert part_files(HubFile("o/r", "F16/m-F16-00001-of-00002.gguf")) == [
        HubFile("o/r", "F16/m-F16-00001-of-00002.gguf"),
        HubFile("o/r", "F16/m-F16-00002-of-00002.gguf"),
    ]
    assert part_files(HubFile("o/r", "m-Q8_0.gguf")) == [HubFile("o/r", "m-Q8_0.gguf")]


GIB = 1 << 30
FILES = [("m-Q2_K.gguf", 1 * GIB), ("m-Q4_K_M.gguf", 2 * GIB), ("m-Q8_0.gguf", 4 * GIB), ("m-F16.gguf", 8 * GIB)]


def test_a_repository_named_alone_gets_q4_k_m_when_it_fits_and_the_reason() -> None:
    picked, why = pick_file(HubFile("o/m-GGUF", ""), FILES, memory_free=16 * GIB, overhead=1.3)
    assert picked == HubFile("o/m-GGUF", "m-Q4_K_M.gguf")
    assert why.startswith("Q4_K_M, the usual balance of quality and speed: it needs about 2.6 GiB of the 16.0 GiB")


def test_without_room_for_q4_k_m_the_best_file_that_fits_is_picked_or_none_with_the_smallest_named() -> None:
    only_small = [("m-Q8_0.gguf", 4 * GIB), ("m-Q3_K_M.gguf", GIB)]
    picked, why = pick_file(HubFile("o/m-GGUF", ""), only_small, memory_free=2 * GIB, overhead=1.3)
    assert picked.filename == "m-Q3_K_M.gguf" and "the best of its files that fits" in why
    with pytest.raises(HubNotFound) as none:
        pick_file(HubFile("o/m-GGUF", ""), FILES, memory_free=GIB, overhead=1.3)
    assert "the smallest, m-Q2_K.gguf, needs about 1.3 GiB" in none.value.message
    with pytest.raises(HubNotFound):
        pick_file(HubFile("o/m", ""), [], memory_free=GIB, overhead=1.3)
