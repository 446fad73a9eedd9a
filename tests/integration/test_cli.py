"""`hearth chat` and `hearth doctor` as a user runs them: real subprocesses on the real embedded model."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import QWEN25_CODER_05B, assembled_model

pytestmark = pytest.mark.integration


def hearth(*args: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"HEARTH_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_chat_streams_an_answer(isolated_home: Path, embedded_model: Path) -> None:
    result = hearth("chat", "What is the capital of France?", "--temperature", "0", home=isolated_home)
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout
    assert "tokens/s" in result.stderr
    assert "Model ready" in result.stderr


def test_chat_is_saved_as_a_conversation(isolated_home: Path, embedded_model: Path) -> None:
    result = hearth("chat", "Say hi", "--max-tokens", "8", home=isolated_home)
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(isolated_home / "conversations.db") as db:
        assert db.execute("SELECT title FROM conversations").fetchall() == [("Say hi",)]


def test_chat_answers_from_an_attached_file(isolated_home: Path, embedded_model: Path, tmp_path: Path) -> None:
    note = tmp_path / "boat.txt"
    note.write_text("The boat Marigold is moored at pier 7. Its engine was serviced by Ewan Ross in March.")
    result = hearth("chat", "--attach", str(note), "Who serviced the engine?", "--temperature", "0", home=isolated_home)
    assert result.returncode == 0, result.stderr
    assert "Ross" in result.stdout
    assert "Attaching boat.txt: reading" in result.stderr
    assert "[boat.txt: whole file in context]" in result.stderr
    assert "[1] boat.txt · whole file" in result.stderr
    with sqlite3.connect(isolated_home / "conversations.db") as db:
        assert db.execute("SELECT name FROM attachments").fetchall() == [("boat.txt",)]


def test_chat_refuses_a_file_it_cannot_read(isolated_home: Path, embedded_model: Path, tmp_path: Path) -> None:
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    result = hearth("chat", "--attach", str(tmp_path / "photo.png"), "What is in it?", home=isolated_home)
    assert result.returncode == 1
    assert "photo.png was not attached: .png is not supported" in result.stderr
    assert "what to do: Nothing was sent" in result.stderr
    with sqlite3.connect(isolated_home / "conversations.db") as db:
        assert db.execute("SELECT COUNT(*) FROM conversations").fetchone() == (0,)


def test_chat_with_a_missing_model_says_what_to_do(isolated_home: Path, tmp_path: Path) -> None:
    result = hearth("chat", "hi", "--model", str(tmp_path / "nope.gguf"), home=isolated_home)
    assert result.returncode == 1
    assert "Model file not found" in result.stderr
    assert "what to do:" in result.stderr
    assert "Traceback" not in result.stderr


def test_chat_with_an_empty_question(isolated_home: Path, embedded_model: Path) -> None:
    result = hearth("chat", "  ", home=isolated_home)
    assert result.returncode == 1
    assert "nothing to send" in result.stderr


def test_chat_with_an_invalid_setting(isolated_home: Path) -> None:
    result = hearth("chat", "hi", "--context", "5", home=isolated_home)
    assert result.returncode == 1
    assert "model.context_length" in result.stderr


def test_doctor_shows_the_machine_and_picks_llamacpp(isolated_home: Path, embedded_model: Path) -> None:
    result = hearth("doctor", home=isolated_home)
    assert result.returncode == 0, result.stderr
    assert "CPU:" in result.stdout
    assert "RAM:" in result.stdout
    assert "SmolLM2-135M-Instruct (Q4_1)" in result.stdout
    assert "backend: llama.cpp (CPU)" in result.stdout
    assert "OpenVINO CPU:" in result.stdout  # the OpenVINO devices are listed too
    assert "CPU      [" in result.stdout and "30 layers" in result.stdout  # the memory bar of the plan
    assert "- llama.cpp (CPU): chosen automatically — no GPU or NPU here can run this model" in result.stdout
    assert "- Not chosen — OpenVINO on the CPU: available" in result.stdout  # each other route, with its reason


def test_chat_through_openvino_on_the_cpu(isolated_home: Path, embedded_model: Path) -> None:
    result = hearth(
        "chat", "What is the capital of France?", "--temperature", "0", "--backend", "openvino", home=isolated_home
    )
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout
    assert "Compiling" in result.stderr and "tokens/s" in result.stderr
    assert any((isolated_home / "cache" / "compiled").iterdir())  # the second load skips compilation


def test_a_device_this_machine_lacks_is_refused_with_the_reason(isolated_home: Path, embedded_model: Path) -> None:
    result = hearth("chat", "hi", "--backend", "cuda", home=isolated_home)
    assert result.returncode == 1
    assert "NVIDIA" in result.stderr and "Traceback" not in result.stderr


def test_doctor_json_is_a_bug_report(isolated_home: Path, embedded_model: Path) -> None:
    result = hearth("doctor", "--json", home=isolated_home)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["plan"]["backend"] == "llamacpp"
    assert report["plan"]["placements"][0]["device"] == "CPU"
    assert report["hardware"]["openvino"][0]["id"] == "CPU"
    assert report["hardware"]["physical_cores"] >= 1
    assert report["hardware"]["llama_cpp"]["rpc"] is True
    assert len(report["model"]["sha256"]) == 64
    assert report["data_dir"] == str(isolated_home)


def test_killing_the_app_mid_answer_loses_no_saved_conversation(isolated_home: Path, embedded_model: Path) -> None:
    first = hearth("chat", "Remember the word lantern.", "--max-tokens", "16", home=isolated_home)
    assert first.returncode == 0, first.stderr
    env = os.environ | {"HEARTH_HOME": str(isolated_home)}
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "chat", "Write a very long story about the sea.", "--max-tokens", "2000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while not process.stdout.read(1) and time.monotonic() < deadline:
        pass  # wait until the answer is streaming
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    with sqlite3.connect(isolated_home / "conversations.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = db.execute(
            "SELECT c.title, m.role FROM messages m JOIN conversations c ON c.id = m.conversation_id ORDER BY m.id"
        ).fetchall()
    assert rows[:2] == [("Remember the word lantern.", "user"), ("Remember the word lantern.", "assistant")]
    assert rows[2] == ("Write a very long story about the sea.", "user")


def test_ui_on_a_busy_port_says_so(isolated_home: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = hearth("ui", "--port", str(port), home=isolated_home, timeout=60)
    assert result.returncode == 1
    assert f"Cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "--port" in result.stderr


def test_ingest_and_collections_from_the_terminal(isolated_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "tides.md").write_text("# Tides\n\nThe moon pulls the sea.\n")
    (folder / "photo.jpg").write_bytes(b"\xff\xd8\xff" + bytes(64))
    first = hearth("ingest", str(folder), "--collection", "Sea notes", home=isolated_home)
    assert first.returncode == 0, first.stderr
    assert "indexed    tides.md (1 passage)" in first.stdout
    assert "skipped    photo.jpg: .jpg is not supported" in first.stdout
    assert "1 indexed, 0 unchanged, 1 skipped, 0 removed" in first.stderr
    again = hearth("ingest", str(folder), "--collection", "Sea notes", home=isolated_home)
    assert "unchanged  tides.md" in again.stdout

    listing = hearth("collections", home=isolated_home)
    assert "Sea notes: 1 file, 1 passage, 1 skipped (embedder all-MiniLM-L6-v2)" in listing.stdout
    detail = hearth("collections", "Sea notes", home=isolated_home)
    assert "tides.md\t1 passage" in detail.stdout
    missing = hearth("collections", "Lake notes", home=isolated_home)
    assert missing.returncode == 1
    assert "no collection called 'Lake notes'" in missing.stderr
    assert "hearth ingest PATH --collection NAME" in missing.stderr
    deleted = hearth("collections", "Sea notes", "--delete", home=isolated_home)
    assert deleted.returncode == 0
    assert "No collections yet" in hearth("collections", home=isolated_home).stdout
    assert (folder / "tides.md").exists()


def test_ask_answers_with_numbered_sources(isolated_home: Path, tmp_path: Path) -> None:
    # The packaged 0.5B instruct model: the embedded 135M reads the passage but names the keeper only by luck.
    model = assembled_model(QWEN25_CODER_05B)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "keepers.md").write_text("# Keepers\n\nMorag Innes was the last keeper of Skerry; she left in 1998.\n")
    assert hearth("ingest", str(folder), "-c", "Skerry", home=isolated_home).returncode == 0
    result = hearth(
        "ask",
        "Who was the last keeper of Skerry?",
        "-c",
        "Skerry",
        "--temperature",
        "0",
        "--model",
        str(model),
        home=isolated_home,
    )
    assert result.returncode == 0, result.stderr
    answer, _, sources = result.stdout.partition("\nSources:\n")
    assert "Morag" in answer
    assert sources.startswith("[1] keepers.md · Keepers\n")
    assert "retrieve" in result.stderr and "first token after" in result.stderr
    unknown = hearth("ask", "anything", "-c", "Nowhere", home=isolated_home)
    assert unknown.returncode == 1
    assert "no collection called 'Nowhere'" in unknown.stderr


DATA = Path(__file__).resolve().parent.parent / "data"


def test_retrieval_quality_on_the_shipped_question_set(isolated_home: Path) -> None:
    """The score CI keeps: hybrid retrieval over tests/data/corpus (PDF, DOCX, HTML, Markdown, text, CSV)."""
    assert hearth("ingest", str(DATA / "corpus"), "-c", "eval", home=isolated_home).returncode == 0
    result = hearth("eval", "retrieval", str(DATA / "retrieval-qa.jsonl"), "-c", "eval", home=isolated_home)
    assert result.returncode == 0, result.stderr
    metrics = result.stdout.strip().splitlines()[-1].split()
    values = dict(zip(metrics[0::2], map(float, metrics[1::2]), strict=True))
    assert values["hit@5"] == 1.0, result.stdout
    assert values["hit@1"] >= 0.9, result.stdout
    assert values["MRR"] >= 0.9, result.stdout


def test_eval_retrieval_names_the_bad_lines_of_a_question_file(isolated_home: Path, tmp_path: Path) -> None:
    questions = tmp_path / "qa.jsonl"
    questions.write_text('{"question": "Who built it?", "file": "notes.md"}\n{"question": "When?", "gold_file": "a"\n')
    result = hearth("eval", "retrieval", str(questions), "-c", "anything", home=isolated_home)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and "KeyError" not in result.stderr
    assert 'line 1 has no "gold_file" (it has: file, question)' in result.stderr
    assert "line 2 is not valid JSON" in result.stderr
    assert "what to do:" in result.stderr and '"gold_page"' in result.stderr


def tides_collection_and_questions(home: Path, folder: Path) -> Path:
    """Collection "tides" of one file, and two questions: one about it, one naming a file it does not have."""
    docs = folder / "docs"
    docs.mkdir()
    (docs / "tides.md").write_text("# Tides\n\nThe spring tide at Skerry reaches 4.2 metres.\n")
    assert hearth("ingest", str(docs), "-c", "tides", home=home).returncode == 0
    questions = folder / "qa.jsonl"
    lines = [
        {"question": "How high is the spring tide?", "gold_file": "tides.md", "gold_text": "4.2 metres"},
        {"question": "How high is the neap tide?", "gold_file": "tide.md"},
    ]
    questions.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return questions


def test_eval_retrieval_warns_of_gold_files_missing_from_the_collection(isolated_home: Path, tmp_path: Path) -> None:
    questions = tides_collection_and_questions(isolated_home, tmp_path)
    result = hearth("eval", "retrieval", str(questions), "-c", "tides", home=isolated_home)
    assert result.returncode == 0, result.stderr
    assert "'tide.md' is not in collection 'tides': 1 question (2) cannot be found" in result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("hit@1 0.500")
    assert "search time per question: median" in result.stdout


def test_eval_retrieval_asks_only_the_part_its_split_file_names(isolated_home: Path, tmp_path: Path) -> None:
    questions = tides_collection_and_questions(isolated_home, tmp_path)
    no_split = hearth("eval", "retrieval", str(questions), "-c", "tides", "--part", "held-out", home=isolated_home)
    assert no_split.returncode != 0 and "qa.jsonl has no split file" in no_split.stderr
    (tmp_path / "qa.split.json").write_text(json.dumps({"tuning": [2], "held-out": [1]}))
    held_out = hearth("eval", "retrieval", str(questions), "-c", "tides", "--part", "held-out", home=isolated_home)
    assert held_out.returncode == 0, held_out.stderr
    assert held_out.stdout.strip().splitlines()[-1].startswith("hit@1 1.000")  # only the answerable line 1
    tuning = hearth("eval", "retrieval", str(questions), "-c", "tides", "--part", "tuning", home=isolated_home)
    assert tuning.stdout.strip().splitlines()[-1].startswith("hit@1 0.000")
