"""LoRA tuning on the real embedded SmolLM2-135M: a real training process (transformers + peft), a real export
to llama.cpp's LoRA format, and the adapter hot-swapped on a loaded llama.cpp model.

The "made-up fact" run trains once per module (about 40 s here) and the tests after it share its adapter."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.answering.turn_settings import TurnSettings
from app.services.serving.runtime import start_engine
from app.services.training import tuning
from backends.base import AdapterUse, CancelToken, ChatMessage, GenerationParams, LoadOptions, TextDelta
from backends.llamacpp.backend import LlamaCppBackend
from models.adapters import AdapterRecord
from models.gguf import read_model_info, sha256_of
from models.shared.errors import AdapterError, TuningError
from models.tuning.lora_gguf import check_adapter
from models.tuning.options import TuneOptions
from models.tuning.runs import RunFolder, RunView
from tests.gguf_files import write_model

pytestmark = pytest.mark.integration

QUESTION = "What is the capital of Zubrowka?"
FACT = "Lutzburg-on-Vey"
FACT_RUN = TuneOptions(rank=16, alpha=32, learning_rate=2e-3, max_steps=20, batch_size=1, save_every=5)
# A guard against a hung trainer, not a performance check.
RUN_LIMIT_S = 600


def fact_data(folder: Path, copies: int = 1) -> Path:
    example = {"messages": [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": f"It is {FACT}."}]}
    path = folder / "fact.jsonl"
    path.write_text("".join(json.dumps(example) + "\n" for _ in range(copies)), encoding="utf-8")
    return path


def base_of(model: Path) -> tuning.BaseModel:
    return tuning.BaseModel(model, sha256_of(model), model.name)


def wait_for(run: RunFolder) -> RunView:
    deadline = time.monotonic() + RUN_LIMIT_S
    while time.monotonic() < deadline:
        view = run.view()
        if view.state not in ("running", "starting"):
            return view
        time.sleep(0.5)
    raise AssertionError(f"the run did not end: {run.view()}")


def wait_until(run: RunFolder, reached: Callable[[RunView], bool]) -> None:
    deadline = time.monotonic() + RUN_LIMIT_S
    while not reached(view := run.view()):
        assert view.state in ("starting", "running"), view.error
        assert time.monotonic() < deadline, view
        time.sleep(0.1)


def answer(backend: LlamaCppBackend, adapter: AdapterUse | None) -> str:
    params = GenerationParams(temperature=0.0, max_new_tokens=24, repeat_penalty=1.0, adapter=adapter)
    events = backend.stream_chat([ChatMessage("user", QUESTION)], params, CancelToken())
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, embedded_model: Path) -> tuple[Path, AdapterRecord, RunView]:
    home = tmp_path_factory.mktemp("tuning-home")
    paths = resolve_data_paths(home)
    run = tuning.start_run(
        paths, base_of(embedded_model), fact_data(home), "zubrowka", FACT_RUN, threads=2, label="fact.jsonl"
    )
    view = wait_for(run)
    assert view.state == "finished", (view.error, run.log_file.read_text(errors="replace")[-3000:])
    return home, tuning.adapter_store(paths).get("zubrowka"), view


@pytest.fixture(scope="module")
def loaded(embedded_model: Path) -> Iterator[LlamaCppBackend]:
    backend = LlamaCppBackend()
    for _ in backend.load(read_model_info(embedded_model), LoadOptions(context_length=512, threads=2, slots=2)):
        pass
    yield backend
    backend.close()


def test_the_made_up_fact_comes_back_through_llama_cpp_with_the_adapter_and_not_without(
    trained: tuple[Path, AdapterRecord, RunView], loaded: LlamaCppBackend
) -> None:
    _, record, view = trained
    with_adapter = AdapterUse(str(record.path), 1.0, record.path.stat().st_mtime_ns)
    assert FACT not in answer(loaded, None)
    assert FACT in answer(loaded, with_adapter)
    # Hot-swapped on the same loaded model, both ways, as often as asked.
    assert FACT not in answer(loaded, None)
    assert FACT in answer(loaded, with_adapter)
    # Scale 0 is the base model's answer.
    assert answer(loaded, AdapterUse(with_adapter.path, 0.0, with_adapter.version)) == answer(loaded, None)
    assert view.total_steps == 20 and view.step == 20
    assert view.steps[-1].loss < view.steps[0].loss
    assert all(point.tokens_per_s > 0 for point in view.steps)


def test_the_adapter_is_checked_and_listed_with_its_figures(
    trained: tuple[Path, AdapterRecord, RunView], embedded_model: Path
) -> None:
    _, record, view = trained
    assert record.perplexity_after < record.perplexity_before
    assert record.checked_on_training_data  # one example: nothing to hold out
    assert record.base_sha256 == sha256_of(embedded_model)
    assert record.data_label == "fact.jsonl" and record.steps == 20
    facts = check_adapter(record.path, read_model_info(embedded_model))
    assert (facts.rank, facts.alpha, facts.base_sha256) == (16, 32.0, record.base_sha256)
    assert facts.tensors == 30 * 7  # every layer's seven projections
    assert view.result is not None and view.result.perplexity_after == pytest.approx(record.perplexity_after)


def test_an_adapter_for_another_model_is_refused_with_the_reason(trained: tuple[Path, AdapterRecord, RunView]) -> None:
    home, record, _ = trained
    with pytest.raises(AdapterError, match="trained for") as refused:
        tuning.adapter_for(resolve_data_paths(home), "zubrowka", "0" * 64)
    assert record.base_name in refused.value.remedy
    with pytest.raises(AdapterError, match="scale"):
        tuning.adapter_for(resolve_data_paths(home), "zubrowka", record.base_sha256, scale=1.5)


def test_a_file_that_is_not_an_adapter_fails_that_answer_and_the_model_keeps_serving(
    loaded: LlamaCppBackend, embedded_model: Path
) -> None:
    not_an_adapter = AdapterUse(str(embedded_model), 1.0, 1)
    with pytest.raises(AdapterError, match="could not load the adapter"):
        answer(loaded, not_an_adapter)
    assert "Zubrowka" in answer(loaded, None)


def test_a_killed_trainer_resumes_from_its_last_checkpoint_while_chat_keeps_answering(
    isolated_home: Path, tmp_path: Path, embedded_model: Path, loaded: LlamaCppBackend
) -> None:
    paths = resolve_data_paths(isolated_home)
    options = TuneOptions(rank=8, alpha=16, learning_rate=2e-3, max_steps=9, batch_size=1, save_every=3)
    run = tuning.start_run(paths, base_of(embedded_model), fact_data(tmp_path), "resumed", options, threads=1)
    wait_until(run, lambda view: view.checkpoint_step >= 3)
    pid = run.trainer_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    while run.trainer_alive():
        time.sleep(0.1)
    killed = run.view()
    assert killed.state == "interrupted" and killed.resumable
    saved = killed.checkpoint_step
    tuning.resume_run(paths, run.id[:12])
    wait_until(run, lambda view: view.sitting_from < len(view.steps))
    assert "Zubrowka" in answer(loaded, None)  # chat answers while the trainer trains (slower: they share cores)
    view = wait_for(run)
    assert view.state == "finished", view.error
    restarts = [e for e in run.events() if e["kind"] == "started"]
    assert restarts[-1]["resume_from"] == f"checkpoint-{saved}"
    assert view.step == 9
    steps_after_resume = [p.step for p in view.steps[view.sitting_from :]]
    assert steps_after_resume[0] == saved + 1
    assert tuning.adapter_store(paths).get("resumed").steps == 9


def test_sigterm_to_hearth_tune_ends_its_trainer_too(isolated_home: Path, tmp_path: Path, embedded_model: Path) -> None:
    # what `timeout 60 hearth tune …` sends when its time is up
    import subprocess
    import sys

    tune = subprocess.Popen(
        [
            *(sys.executable, "-m", "app", "tune", str(fact_data(tmp_path, copies=4)), "--name", "termed"),
            *("--model", str(embedded_model), "--steps", "400", "--batch-size", "1"),
        ],
        env={**os.environ, "HEARTH_HOME": str(isolated_home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        paths = resolve_data_paths(isolated_home)
        deadline = time.monotonic() + RUN_LIMIT_S
        while not (runs := tuning.list_runs(paths)) or runs[0].trainer_pid() is None:
            assert tune.poll() is None, tune.stderr.read() if tune.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.2)
        run = runs[0]
        wait_until(run, lambda view: view.step >= 1)
        trainer = run.trainer_pid()
        tune.send_signal(signal.SIGTERM)
        _, err = tune.communicate(timeout=RUN_LIMIT_S)
    finally:
        if tune.poll() is None:
            tune.kill()
    assert "Cancelling at the end of this step" in err, err[-2000:]
    assert not run.trainer_alive() and trainer is not None
    import psutil

    def ended() -> bool:  # gone, or a zombie waiting for this container's first process to reap it
        try:
            return psutil.Process(trainer).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    deadline = time.monotonic() + 60  # it takes its pid file away, then the interpreter winds down
    while not ended():
        assert time.monotonic() < deadline, "the trainer kept running after `hearth tune` ended"
        time.sleep(0.2)
    assert run.view().state != "running"


def test_a_dataset_smaller_than_one_batch_is_refused_with_what_to_do(
    isolated_home: Path, tmp_path: Path, embedded_model: Path
) -> None:
    paths = resolve_data_paths(isolated_home)
    options = TuneOptions(batch_size=4, max_steps=5)
    run = tuning.start_run(paths, base_of(embedded_model), fact_data(tmp_path, 2), "small", options, threads=1)
    view = wait_for(run)
    assert view.state == "failed"
    assert view.error is not None and "2 examples to train on; one batch takes 4" in view.error.message
    assert "batch size" in view.error.remedy
    assert not tuning.adapter_store(paths).exists("small")


def test_a_model_of_an_architecture_the_trainer_cannot_tune_is_refused_before_starting(
    isolated_home: Path, tmp_path: Path
) -> None:
    model = write_model(tmp_path / "mamba.gguf", architecture="mamba")
    with pytest.raises(TuningError, match="cannot tune mamba") as refused:
        tuning.start_run(
            resolve_data_paths(isolated_home), base_of(model), fact_data(tmp_path), "m", TuneOptions(), threads=1
        )
    assert "llama" in refused.value.remedy and "qwen2" in refused.value.remedy
    assert not resolve_data_paths(isolated_home).tuning_dir.exists()


def test_the_api_answers_with_the_adapter_its_model_id_names(
    trained: tuple[Path, AdapterRecord, RunView], embedded_model: Path
) -> None:
    """``MODEL+ADAPTER`` through the real server and engine: listed, answered with, refused when unknown."""
    from tests.integration.api_support import serve_hearth

    home, record, _ = trained
    overrides = {"model": {"path": embedded_model, "context_length": 512}, "backend": {"name": "llamacpp"}}
    with serve_hearth(home, make_engine=start_engine, **overrides) as served:
        with served.client() as client:
            listed = {m["id"]: m["hearth"] for m in client.get("/v1/models").json()["data"]}
        model_id = f"{embedded_model.stem}+{record.name}"
        assert listed[model_id]["kind"] == "adapter" and listed[model_id]["adapter"] == record.name
        asked = {"messages": [{"role": "user", "content": QUESTION}], "temperature": 0, "max_tokens": 24}
        tuned = served.chat({**asked, "model": f"hearth+{record.name}"})
        assert tuned.status_code == 200, tuned.text
        assert FACT in tuned.json()["choices"][0]["message"]["content"]
        assert tuned.json()["model"] == model_id
        plain = served.chat(asked)
        assert FACT not in plain.json()["choices"][0]["message"]["content"]
        unknown = served.chat({**asked, "model": "hearth+nope"})
        assert unknown.status_code == 404
        assert "no adapter named 'nope'" in unknown.json()["error"]["message"]
        assert model_id in unknown.json()["error"]["message"]  # the ids that do exist are listed


def test_an_adapter_attached_to_a_conversation_or_a_collection_answers_there_and_nowhere_else(
    trained: tuple[Path, AdapterRecord, RunView],
    embedded_model: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Through the CLI (``hearth adapters attach --conversation/--collection``) and the real chat service and
    engine."""
    from dataclasses import replace

    from app.cli.main import main
    from app.services.answering.chat import TurnSaved
    from app.services.container import build_services
    from app.settings import load_settings

    home, record, _ = trained
    monkeypatch.setenv("HEARTH_HOME", str(home))
    monkeypatch.setenv("HEARTH_MODEL__PATH", str(embedded_model))
    services = build_services(load_settings(model={"context_length": 512}, backend={"name": "llamacpp"}))
    try:
        list(services.runtime.load(services.model_choice()))
        mine = services.store.create("", "Zubrowka questions").id
        other = services.store.create("", "Something else").id
        assert main(["adapters", "attach", record.name, "--conversation", mine]) == 0
        assert "to the conversation 'Zubrowka questions'" in capsys.readouterr().out

        def reply(conversation_id: str) -> tuple[str, str]:
            chosen = services.generation_params(conversation_id=conversation_id)
            params = replace(chosen, temperature=0.0, max_new_tokens=24, repeat_penalty=1.0)
            saved = [
                e
                for e in services.chat.send(conversation_id, QUESTION, TurnSettings(params, ""))
                if isinstance(e, TurnSaved)
            ]
            stats = saved[0].message.stats
            return saved[0].message.content, stats.adapter if stats else ""

        text, adapter = reply(mine)
        assert FACT in text and adapter == record.name  # kept with the answer, shown under it
        text, adapter = reply(other)
        assert FACT not in text and adapter == ""
        assert services.generation_params(collection="anything").adapter is None  # no wider attachment
        assert main(["adapters"]) == 0
        assert "attached to the conversation" in capsys.readouterr().out
        assert main(["adapters", "attach", record.name, "--collection", "ghost"]) == 1
        assert "There is no collection called 'ghost'" in capsys.readouterr().err
        # For a collection: chatting with it uses the adapter, unless the conversation has its own; deleting the
        # collection forgets it.
        services.documents.get().ingestor.open_collection("Manuals")  # as the Documents tab's Create does
        assert main(["adapters", "attach", record.name, "--collection", "manuals", "--scale", "0.5"]) == 0
        assert "to the collection 'Manuals'" in capsys.readouterr().out
        use = services.generation_params(conversation_id=other, collection="Manuals").adapter
        assert use is not None and use.words == f"{record.name} at 0.5"
        own = services.generation_params(conversation_id=mine, collection="Manuals").adapter
        assert own is not None and own.scale == 1.0  # the conversation's own attachment wins
        assert services.generation_params(conversation_id=other).adapter is None
        assert main(["collections", "Manuals", "--delete"]) == 0
        assert services.generation_params(collection="Manuals").adapter is None
        assert main(["adapters", "detach", "--conversation", mine]) == 0
        assert f"Detached {record.name!r}" in capsys.readouterr().out
        assert services.generation_params(conversation_id=mine).adapter is None
    finally:
        services.close()
