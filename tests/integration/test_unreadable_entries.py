"""A folder holding a symbolic-link loop (``ln -s b a; ln -s a b``), a broken link, a named pipe, files and folders
Hearth may not read: each gets a reason in the collection, and everything else in the folder is indexed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.paths import resolve_data_paths
from app.services.library.documents import DocumentServices, build_documents
from app.settings import load_settings
from rag.ingest import FileOutcome
from rag.retrieval.embeddings import Embedder
from tests.helpers import require

pytestmark = pytest.mark.integration

LOOP = "it is a symbolic link that leads back to itself (a loop); it was not read. Remove or fix the link"


def open_documents(home: Path, embedder: Embedder) -> DocumentServices:
    settings = load_settings(home=home)
    paths = resolve_data_paths(settings.home)
    paths.root.mkdir(parents=True, exist_ok=True)
    return build_documents(settings, paths, embedder)


@pytest.fixture
def documents(isolated_home: Path, embedder: Embedder) -> Iterator[DocumentServices]:
    services = open_documents(isolated_home, embedder)
    yield services
    services.close()


def outcomes(documents: DocumentServices, paths: list[Path]) -> dict[str, FileOutcome]:
    events = documents.ingestor.ingest(paths, "links")
    return {Path(e.path).name: e for e in events if isinstance(e, FileOutcome)}


def test_a_symlink_loop_and_other_odd_entries_are_skipped_and_the_rest_indexed(
    documents: DocumentServices, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    (folder / "deeper").mkdir(parents=True)
    (folder / "keeper.txt").write_text("The keeper climbed the stairs every evening.")
    (folder / "deeper" / "tides.md").write_text("# Tides\n\nThe moon pulls the sea.")
    (folder / "a").symlink_to("b")  # exactly `ln -s b a; ln -s a b`, inside the folder
    (folder / "b").symlink_to("a")
    (folder / "deeper" / "itself").symlink_to("itself")
    (folder / "broken.txt").symlink_to("gone.txt")
    os.mkfifo(folder / "pipe.txt")  # reading it would wait forever

    first = outcomes(documents, [folder, folder / "a"])
    assert first["keeper.txt"].outcome == "indexed"
    assert first["tides.md"].outcome == "indexed"
    reasons = {name: o.reason for name, o in first.items() if o.outcome == "skipped"}
    assert reasons == {
        "a": LOOP,
        "b": LOOP,
        "itself": LOOP,
        "broken.txt": "it is a symbolic link to something that does not exist; it was not read. Remove or fix the link",
        "pipe.txt": "it is a named pipe, not a regular file; it was not read",
    }
    # What the Documents tab and `hearth collections links` list: every entry of the folder, with its reason.
    listed = {Path(r.path).name: (r.status, r.reason) for r in documents.files("links")}
    assert listed["a"] == ("skipped", LOOP) and listed["pipe.txt"][0] == "skipped"
    assert listed["keeper.txt"] == ("indexed", "")
    assert len(listed) == 7

    again = outcomes(documents, [folder])
    assert again["keeper.txt"].outcome == "unchanged" and again["b"].reason == LOOP

    (folder / "a").unlink()
    (folder / "b").unlink()
    (folder / "deeper" / "itself").unlink()
    third = outcomes(documents, [folder])
    assert {third[name].outcome for name in ("a", "b", "itself")} == {"removed"}


def test_what_hearth_may_not_read_is_skipped_and_kept(embedder: Embedder, isolated_home: Path, tmp_path: Path) -> None:
    home, folder = isolated_home, tmp_path / "notes"
    (folder / "locked").mkdir(parents=True)
    (folder / "keeper.txt").write_text("The keeper climbed the stairs every evening.")
    (folder / "locked" / "logbook.txt").write_text("Ships seen tonight: three.")
    documents = open_documents(home, embedder)
    try:
        first = outcomes(documents, [folder])
    finally:
        documents.close()
    assert {name: o.outcome for name, o in first.items()} == {"keeper.txt": "indexed", "logbook.txt": "indexed"}

    (folder / "locked").chmod(0)
    secret = folder / "secret.txt"
    secret.write_text("Not for Hearth.")
    secret.chmod(0)
    try:
        result = subprocess.run(
            [*without_root_privileges(), sys.executable, "-m", "app", "ingest", str(folder), "--collection", "links"],
            capture_output=True,
            text=True,
            env=os.environ | {"HEARTH_HOME": str(home)},
            timeout=600,
        )
    finally:
        (folder / "locked").chmod(0o755)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert sorted(result.stdout.splitlines()) == [
        "skipped    locked: Hearth may not open this folder (permission denied); nothing in it was read",
        "skipped    secret.txt: Hearth may not read it (permission denied); it was not read. Change its "
        "permissions to add it",
        "unchanged  keeper.txt (1 passage)",
    ], result.stdout
    documents = open_documents(home, embedder)
    try:  # logbook.txt, behind the folder that could not be opened, is still in the collection
        listed = {Path(r.path).name: (r.status, r.reason) for r in documents.files("links")}
    finally:
        documents.close()
    assert listed["logbook.txt"] == ("indexed", "")
    assert listed["secret.txt"][0] == "skipped" and "permission denied" in listed["secret.txt"][1]


def without_root_privileges() -> list[str]:
    """A command prefix under which permissions apply: root reads everything, so as root the capabilities that
    let it (overriding and bypassing file permissions) are dropped for the command, with util-linux's setpriv."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    require(setpriv is not None, "setpriv (util-linux)", "install util-linux")
    assert setpriv is not None
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]
