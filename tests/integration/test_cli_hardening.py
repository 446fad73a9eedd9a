"""The smaller holes, attacked through real `hearth` commands: a data folder others can read, file names that
drive the terminal, an import that probes paths, a GGUF that costs gigabytes on every listing, and a model that
is listed as fitting although llama.cpp cannot load it."""

import os
import shutil
import sqlite3
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from models.gguf import sha256_of
from tests.gguf_files import EmptyStrings, write_model
from tests.helpers import write_tiny_gguf
from tests.integration.conftest import OTHER_ACCOUNT
from tests.integration.test_cli import hearth

pytestmark = pytest.mark.integration

EVIL = "evil\x1b[2J\nname"
EVIL_SHOWN = "evil\\x1b[2J\\nname"


def modes_under(root: Path) -> dict[str, int]:
    """Permission bits of the folder and of everything under it, by path relative to it."""
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def assert_private(root: Path) -> dict[str, int]:
    modes = modes_under(root)
    loose = {name: oct(mode) for name, mode in modes.items() if mode & 0o077}
    assert not loose, f"readable by others: {loose}"
    return modes


def assert_escaped(output: str) -> None:
    assert "\x1b" not in output
    assert not any(line.startswith("name.") for line in output.splitlines())  # no line forged by the newline


def test_ingest_escapes_names_and_keeps_the_index_private(isolated_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / f"{EVIL}.txt").write_text("The lighthouse keeper rows out at dawn.\n")
    (folder / "tides.md").write_text("# Tides\n\nThe moon pulls the sea.\n")
    ingest = hearth("ingest", str(folder), "-c", "notes", home=isolated_home, timeout=300)
    assert ingest.returncode == 0, ingest.stderr
    assert f"indexed    {EVIL_SHOWN}.txt (1 passage)" in ingest.stdout
    assert_escaped(ingest.stdout + ingest.stderr)
    detail = hearth("collections", "notes", home=isolated_home)
    assert f"{EVIL_SHOWN}.txt\t1 passage" in detail.stdout
    assert_escaped(detail.stdout)
    removed = hearth("collections", "notes", "--remove-file", str(folder / f"{EVIL}.txt"), home=isolated_home)
    assert removed.returncode == 0, removed.stderr
    assert f"Removed {EVIL_SHOWN}.txt from 'notes'" in removed.stdout
    assert_escaped(removed.stdout)

    modes = assert_private(isolated_home)
    assert modes["."] == 0o700 and modes["index.db"] == 0o600 and modes["vectors/chroma.sqlite3"] == 0o600
    assert any(name.endswith("data_level0.bin") for name in modes)  # Chroma's own index files were checked too


def test_models_import_and_list_escape_names_and_keep_the_catalog_private(isolated_home: Path, tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / f"{EVIL}.gguf")
    imported = hearth("models", "import", str(model), "--copy", home=isolated_home)
    assert imported.returncode == 0, imported.stderr
    assert f"Imported {EVIL_SHOWN} (F32)" in imported.stdout
    assert_escaped(imported.stdout)
    listing = hearth("models", "list", home=isolated_home)
    assert listing.returncode == 0, listing.stderr
    assert EVIL_SHOWN in listing.stdout
    assert_escaped(listing.stdout)
    again = hearth("models", "import", str(model), home=isolated_home)  # an error message quoting the name
    assert again.returncode == 1 and "is already known" in again.stderr
    assert_escaped(again.stderr)

    modes = assert_private(isolated_home)
    assert modes["models.db"] == 0o600 and modes["models"] == 0o700
    assert modes[f"models/{EVIL}.gguf"] == 0o600


def test_chat_keeps_conversations_and_the_api_key_private(isolated_home: Path, embedded_model: Path) -> None:
    chat = hearth("chat", "Say hi", "--max-tokens", "4", home=isolated_home)
    assert chat.returncode == 0, chat.stderr
    assert hearth("api-key", home=isolated_home).returncode == 0
    modes = assert_private(isolated_home)
    assert modes["conversations.db"] == 0o600 and modes["api-key"] == 0o600


def test_a_data_folder_from_an_older_hearth_is_made_private_and_the_users_own_files_are_left(
    isolated_home: Path,
) -> None:
    isolated_home.mkdir(mode=0o755)
    isolated_home.chmod(0o755)
    hearths = ["conversations.db", "conversations.db-wal", "api-key", "documents/notes/letter.txt", "vectors/x.bin"]
    for name in hearths:
        (isolated_home / name).parent.mkdir(mode=0o755, exist_ok=True, parents=True)
        (isolated_home / name).write_bytes(b"")
        (isolated_home / name).chmod(0o644)
    for folder in ("documents", "documents/notes", "vectors"):
        (isolated_home / folder).chmod(0o755)
    sqlite3.connect(isolated_home / "conversations.db").close()
    (isolated_home / "my-notes.txt").write_text("the user's own, kept in the same folder")
    (isolated_home / "my-notes.txt").chmod(0o644)

    listing = hearth("models", "list", home=isolated_home)
    assert listing.returncode == 0, listing.stderr
    modes = modes_under(isolated_home)
    assert modes["."] == 0o700
    for name in [*hearths, "documents", "documents/notes", "vectors"]:
        assert modes[name] in (0o600, 0o700), (name, oct(modes[name]))
    assert modes["my-notes.txt"] == 0o644  # not Hearth's: left as it was (unreachable now through the folder)


def test_a_data_folder_another_account_made_first_is_refused_and_left_untouched(
    other_account: tuple[int, int],
) -> None:
    """Another account makes the folder HEARTH_HOME names before the user does (a shared /tmp name): Hearth, run as
    root here, must refuse it rather than keep conversations and the API key where that account can read them."""
    uid, gid = other_account
    shared = Path(tempfile.mkdtemp(prefix="hearth-shared-", dir="/tmp"))  # like /tmp: anyone may make a folder
    shared.chmod(0o1777)
    squatted = shared / "home"
    try:
        made = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "mkdir", "-m", "0777", str(squatted)],
            capture_output=True,
            text=True,
        )
        assert made.returncode == 0, made.stderr
        assert squatted.stat().st_uid == uid

        for command in (["collections"], ["models", "list"], ["api-key"]):
            result = hearth(*command, home=squatted)
            assert result.returncode != 0, (command, result.stdout)
            assert "Traceback" not in result.stderr
            assert f"The data folder {squatted} belongs to another account ({OTHER_ACCOUNT})" in result.stderr
            assert "Set HEARTH_HOME to a folder of your own" in result.stderr
        assert list(squatted.iterdir()) == []  # nothing written where that account can read it
        assert stat.S_IMODE(squatted.stat().st_mode) == 0o777 and squatted.stat().st_uid == uid  # nor taken over
    finally:
        shutil.rmtree(shared)


def test_the_terminal_import_says_exactly_what_is_wrong_with_a_path(isolated_home: Path, tmp_path: Path) -> None:
    (tmp_path / "folder.gguf").mkdir()
    (tmp_path / "four.gguf").write_bytes(b"GGUF")
    (tmp_path / "notes.gguf").write_text("a text file, not a model " * 4)
    os.mkfifo(tmp_path / "pipe.gguf")
    expected = {
        "missing.gguf": "Model file not found",
        "folder.gguf": "is not a file",
        "pipe.gguf": "is not a file",  # refused without opening it: opening a pipe would wait for a writer
        "four.gguf": "far too small to be a GGUF model (4 bytes)",
        "notes.gguf": "does not start with the GGUF signature",
    }
    for name, message in expected.items():
        result = hearth("models", "import", str(tmp_path / name), home=isolated_home, timeout=60)
        assert result.returncode == 1, (name, result.stdout)
        assert message in result.stderr and "what to do:" in result.stderr, (name, result.stderr)
        assert "Traceback" not in result.stderr


def test_a_gguf_of_twelve_million_empty_strings_is_refused_and_listing_stays_cheap(
    isolated_home: Path, tmp_path: Path
) -> None:
    hostile = write_model(tmp_path / "hostile.gguf", entries=[EmptyStrings("tokenizer.ggml.tokens", 12_500_000)])
    imported = hearth("models", "import", str(hostile), home=isolated_home, timeout=120)
    assert imported.returncode == 1
    assert "hostile.gguf is refused: tokenizer.ggml.tokens has 12,500,000 items" in imported.stderr
    assert "what to do:" in imported.stderr and "Traceback" not in imported.stderr

    # An older Hearth imported it: listing shows why it is refused, and keeps the refusal.
    with sqlite3.connect(isolated_home / "models.db") as db:
        db.execute(
            "INSERT INTO models (sha256, path, source, parent, added_at) VALUES (?,?,?,?,?)",
            (sha256_of(hostile), str(hostile), "imported", None, time.time()),
        )
    for _ in range(2):
        listing = hearth("models", "list", home=isolated_home, timeout=120)
        assert listing.returncode == 0, listing.stderr
        assert "hostile.gguf" in listing.stdout and "unreadable: hostile.gguf is refused" in listing.stdout
    with sqlite3.connect(isolated_home / "models.db") as db:
        kept = db.execute("SELECT facts FROM model_facts WHERE path = ?", (str(hostile),)).fetchone()
    assert kept is not None and "12,500,000 items" in kept[0]


def test_an_architecture_llamacpp_does_not_know_is_listed_as_cannot_run_here(
    isolated_home: Path, tmp_path: Path, llama_cpp_installed: None
) -> None:
    unknown = write_model(tmp_path / "foo.gguf", architecture="foo")
    imported = hearth("models", "import", str(unknown), home=isolated_home)
    assert imported.returncode == 0, imported.stderr
    assert "cannot run here: llama.cpp in this Hearth does not know the architecture 'foo'" in imported.stderr
    listing = hearth("models", "list", home=isolated_home)
    row = next(line for line in listing.stdout.splitlines() if " foo " in line)
    assert "cannot run here (red): llama.cpp in this Hearth does not know the architecture 'foo'" in row
    # What the listing says before loading is what llama.cpp says when asked to load it.
    loaded = hearth("chat", "hi", "--model", str(unknown), home=isolated_home, timeout=120)
    assert loaded.returncode == 1 and "llama.cpp could not load foo.gguf" in loaded.stderr
    assert "Traceback" not in loaded.stderr


def test_llamacpp_names_the_architectures_it_loads(llama_cpp_installed: None, embedded_model: Path) -> None:
    from backends.llamacpp.architectures import llamacpp_architectures
    from models.gguf import read_model_info

    known = llamacpp_architectures()
    assert known is not None
    assert {"llama", "qwen2", "qwen3", "gemma3", read_model_info(embedded_model).architecture} <= known
    assert "clip" not in known and "foo" not in known and len(known) > 50
