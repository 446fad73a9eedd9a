"""`hearth models install hf:OWNER/REPO/FILE.gguf` as a user runs it, against a hub the test serves on loopback
(tests/hub_server.py) with the real `huggingface_hub` client pointed at it through HF_ENDPOINT: a file installed and
listed like any other, a cut download gone on with from where it stopped, bytes that do not match their SHA-256 and a
file that is no GGUF refused with nothing left behind, a gated repository without and with a token."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from backends.memory import format_bytes
from tests.helpers import write_tiny_gguf
from tests.hub_server import FakeHub, HostedFile, Repo, hub_serving
from tests.integration.conftest import as_other

pytestmark = pytest.mark.integration

REPO = "makers/Tiny-GGUF"
FILE = "tiny-Q4_K_M.gguf"
REFERENCE = f"hf:{REPO}/{FILE}"
# What another account tries on a kept partial download: read it, or list its folder.
LOOK = "import os, sys; p = sys.argv[1]; os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(1)"


@pytest.fixture
def model_bytes(tmp_path: Path) -> bytes:
    return write_tiny_gguf(tmp_path / "made.gguf", tensors=64).read_bytes()  # about 130 KB


def hearth(home: Path, hub: FakeHub, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    plain = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        env={**plain, "HEARTH_HOME": str(home), "HF_ENDPOINT": hub.url, "HF_HOME": str(home.parent / "hf"), **env},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def installed(home: Path, hub: FakeHub) -> list[dict[str, Any]]:
    listed = hearth(home, hub, "models", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return [row["stored"] for row in json.loads(listed.stdout) if row["stored"]["source"] == "installed"]


def models_folder_files(home: Path) -> list[str]:
    folder = home / "models"
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_a_file_from_the_hub_is_installed_checked_and_listed_like_any_other(
    isolated_home: Path, model_bytes: bytes
) -> None:
    with hub_serving({REPO: Repo({FILE: HostedFile(model_bytes)})}) as hub:
        done = hearth(isolated_home, hub, "models", "install", REFERENCE)
        assert done.returncode == 0, done.stderr
        assert f"{REFERENCE} is ready as " in done.stdout
        assert f"from {hub.url}: only this install uses the network" in done.stderr
        assert "Downloading tiny-Q4_K_M.gguf" in done.stderr and "(100%)" in done.stderr
        [row] = installed(isolated_home, hub)
        assert row["sha256"] == hashlib.sha256(model_bytes).hexdigest()
        assert Path(str(row["path"])) == isolated_home / "models" / FILE
        assert models_folder_files(isolated_home) == [FILE]  # no partial file left
        assert not (isolated_home.parent / "hf" / "hub").exists()  # nothing kept in the Hugging Face cache either
        again = hearth(isolated_home, hub, "models", "install", REFERENCE)
        assert again.returncode == 0 and "is already installed as" in again.stdout
        assert [method for method, path, _ in hub.requests if "/resolve/" in path] == ["GET"]  # fetched once


def test_a_cut_download_goes_on_from_where_it_stopped_and_what_it_kept_is_the_owners_alone(
    model_bytes: bytes, other_account: tuple[int, int]
) -> None:
    # A data folder under folders any account may enter, so that what keeps another account out is Hearth's own.
    parent = Path(tempfile.mkdtemp(prefix="hearth-hub-", dir="/tmp"))
    parent.chmod(0o755)
    home = parent / "hearth-home"
    half = len(model_bytes) // 2
    hosted = HostedFile(model_bytes, cut_after=half, cuts_left=1)
    try:
        with hub_serving({REPO: Repo({FILE: hosted})}) as hub:
            cut_and_resumed(home, hub, model_bytes, half, other_account)
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def cut_and_resumed(
    isolated_home: Path, hub: FakeHub, model_bytes: bytes, half: int, other_account: tuple[int, int]
) -> None:
    """The first run is cut off halfway; what it kept is closed to another account; the second run asks only for
    the rest."""
    cut = hearth(isolated_home, hub, "models", "install", REFERENCE)
    assert cut.returncode == 1, cut.stdout + cut.stderr
    assert f"Install it again to go on from there: hearth models install {REFERENCE}" in cut.stderr
    assert "Traceback" not in cut.stderr
    kept = [name for name in models_folder_files(isolated_home) if name.endswith(".partial")]
    partial = isolated_home / "models" / kept[0]
    assert len(kept) == 1 and partial.stat().st_size == half
    assert installed(isolated_home, hub) == []
    for path in (partial, partial.parent):
        looked = as_other(other_account, "/usr/bin/python3", "-c", LOOK, str(path))
        assert looked.returncode != 0 and "PermissionError" in looked.stderr, (path, looked.stdout)

    done = hearth(isolated_home, hub, "models", "install", REFERENCE)
    assert done.returncode == 0, done.stderr
    ranges = [asked for method, path, asked in hub.requests if method == "GET" and "/resolve/" in path]
    assert ranges == ["", f"bytes={half}-"]  # the second run asked only for the rest
    [row] = installed(isolated_home, hub)
    assert row["sha256"] == hashlib.sha256(model_bytes).hexdigest()
    assert models_folder_files(isolated_home) == [FILE]


@pytest.mark.parametrize("damage", ["bytes-not-the-listed-sha256", "not-a-gguf"])
def test_a_file_refused_leaves_nothing_behind(isolated_home: Path, model_bytes: bytes, damage: str) -> None:
    if damage == "bytes-not-the-listed-sha256":
        hosted = HostedFile(model_bytes, listed_sha256=hashlib.sha256(b"what the makers published").hexdigest())
        said = "its bytes do not match the SHA-256 the hub lists"
    else:
        hosted = HostedFile(b"<html>not a model</html>" * 100)
        said = "GGUF"
    with hub_serving({REPO: Repo({FILE: hosted})}) as hub:
        refused = hearth(isolated_home, hub, "models", "install", REFERENCE)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert said in refused.stderr and "Traceback" not in refused.stderr
        assert installed(isolated_home, hub) == []
        assert models_folder_files(isolated_home) == []
        assert not (isolated_home.parent / "hf" / "hub").exists()


def test_a_gated_repository_asks_for_a_token_and_the_token_is_never_shown(
    isolated_home: Path, model_bytes: bytes
) -> None:
    token = "hf_testtoken0123456789abcdefghij"
    with hub_serving({REPO: Repo({FILE: HostedFile(model_bytes)}, gated_token=token)}) as hub:
        refused = hearth(isolated_home, hub, "models", "install", REFERENCE)
        assert refused.returncode == 1
        assert f"{REPO} is gated" in refused.stderr and "HF_TOKEN" in refused.stderr
        done = hearth(isolated_home, hub, "models", "install", REFERENCE, HF_TOKEN=token)
        assert done.returncode == 0, done.stderr
        assert token not in done.stdout + done.stderr
        assert not any(token in p.read_text(errors="replace") for p in isolated_home.rglob("*.json"))


def test_a_file_the_repository_lacks_is_named_with_the_files_it_has(isolated_home: Path, model_bytes: bytes) -> None:
    with hub_serving({REPO: Repo({FILE: HostedFile(model_bytes), "tiny-Q8_0.gguf": HostedFile(model_bytes)})}) as hub:
        missing = hearth(isolated_home, hub, "models", "install", f"hf:{REPO}/tiny-Q2_K.gguf")
        assert missing.returncode == 1
        assert f"{REPO} has no file tiny-Q2_K.gguf" in missing.stderr
        assert "tiny-Q4_K_M.gguf, tiny-Q8_0.gguf" in missing.stderr
        nowhere = hearth(isolated_home, hub, "models", "install", "hf:nobody/Nothing-GGUF/x.gguf")
        assert nowhere.returncode == 1 and "There is no repository nobody/Nothing-GGUF" in nowhere.stderr


def test_search_lists_each_file_with_its_repository_size_quantization_and_fit(
    isolated_home: Path, model_bytes: bytes
) -> None:
    repos = {
        REPO: Repo({FILE: HostedFile(model_bytes), "tiny-Q8_0.gguf": HostedFile(model_bytes * 2)}, downloads=10),
        "others/Tiny-Chat-GGUF": Repo(
            {
                "tiny-chat.Q4_0.gguf": HostedFile(model_bytes),
                "tiny-chat-Q4_0-00001-of-00002.gguf": HostedFile(model_bytes),  # a part: not installable yet
                "README.md": HostedFile(b"# Tiny chat"),
            },
            downloads=500,
        ),
        "makers/Tiny-Safetensors": Repo({"model.safetensors": HostedFile(b"weights")}, downloads=900),
    }
    with hub_serving(repos) as hub:
        found = hearth(isolated_home, hub, "models", "search", "tiny")
        assert found.returncode == 0, found.stderr
        assert f"Searching {hub.url} for GGUF models matching 'tiny'" in found.stderr
        lines = found.stdout.splitlines()
        assert lines[0] == "others/Tiny-Chat-GGUF"  # the most downloaded first; the safetensors one not at all
        assert lines[1].startswith("  tiny-chat.Q4_0.gguf\t") and "\tQ4_0\tfits here: yes: needs about" in lines[1]
        assert lines[2] == REPO
        assert lines[3].startswith(f"  {FILE}\t") and "\tQ4_K_M\t" in lines[3], lines[3]
        assert lines[4].startswith("  tiny-Q8_0.gguf\t") and "\tQ8_0\t" in lines[4]
        for left_out in ("00001-of-00002", "README", "safetensors"):
            assert left_out not in found.stdout
        assert "hearth models install hf:REPO/FILE.gguf" in found.stdout
        # each size with its unit, as the rest of Hearth writes sizes
        assert all(line.split("\t")[1].endswith(("KiB", "MiB", "GiB", " B")) for line in lines if line.startswith("  "))
        nothing = hearth(isolated_home, hub, "models", "search", "no-such-model")
        assert nothing.returncode == 0 and "No GGUF models on the hub match 'no-such-model'" in nothing.stdout


def test_a_curated_model_installs_by_its_short_name_from_its_repository(
    isolated_home: Path, model_bytes: bytes
) -> None:
    from models.hub_catalog import HUB_CATALOG

    curated = HUB_CATALOG["qwen2.5-7b"]
    with hub_serving({curated.repo: Repo({curated.file_name: HostedFile(model_bytes)})}) as hub:
        listed = hearth(isolated_home, hub, "models", "available")
        assert listed.returncode == 0, listed.stderr
        assert f"qwen2.5-7b            {curated.title}" in listed.stdout and curated.reference in listed.stdout
        done = hearth(isolated_home, hub, "models", "install", "qwen2.5-7b")
        assert done.returncode == 0, done.stderr
        assert f"{curated.reference} is ready as " in done.stdout
        assert [path for _, path, _ in hub.requests if "/resolve/" in path] == [
            f"/{curated.repo}/resolve/main/{curated.file_name}"
        ]
        again = hearth(isolated_home, hub, "models", "available")
        line = next(line for line in again.stdout.splitlines() if line.startswith("qwen2.5-7b "))
        assert "installed as " in line, line


def test_a_repository_named_alone_installs_the_file_that_fits_and_says_why(
    isolated_home: Path, model_bytes: bytes
) -> None:
    files = {
        "tiny-Q2_K.gguf": HostedFile(model_bytes[: len(model_bytes) // 2]),  # not a file Hearth would pick
        FILE: HostedFile(model_bytes),
        "tiny-Q8_0.gguf": HostedFile(model_bytes + b"\0" * 1000),
    }
    with hub_serving({REPO: Repo(files)}) as hub:
        done = hearth(isolated_home, hub, "models", "install", f"hf:{REPO}")
        assert done.returncode == 0, done.stderr
        assert f"Picked {FILE}: Q4_K_M, the usual balance of quality and speed: it needs about " in done.stderr
        assert f"hf:{REPO}/{FILE} is ready as " in done.stdout
        assert [path for _, path, _ in hub.requests if "/resolve/" in path] == [f"/{REPO}/resolve/main/{FILE}"]


def test_with_no_hub_to_reach_or_the_hub_kept_off_search_and_install_say_so_in_one_line(isolated_home: Path) -> None:
    with hub_serving({}) as hub:
        pass  # served and stopped: nothing listens at its address any more
    for args in (("models", "search", "qwen"), ("models", "install", REFERENCE)):
        unreachable = hearth(isolated_home, hub, *args)
        assert unreachable.returncode == 1
        said = [line for line in unreachable.stderr.splitlines() if line.startswith("error: ")]
        assert said == [f"error: The Hugging Face Hub at {hub.url} cannot be reached (ConnectError)."], said
        assert "Traceback" not in unreachable.stderr
        kept_off = hearth(isolated_home, hub, *args, HF_HUB_OFFLINE="1")
        assert kept_off.returncode == 1
        assert "error: HF_HUB_OFFLINE is set, so nothing is fetched from the Hugging Face Hub." in kept_off.stderr
    assert models_folder_files(isolated_home) == []


def test_a_model_split_into_parts_installs_as_one_model_and_a_cut_part_goes_on(
    isolated_home: Path, tmp_path: Path
) -> None:
    first = write_tiny_gguf(tmp_path / "tiny-split.gguf", tensors=64, split_max_tensors=24)
    parts = sorted(tmp_path.glob("tiny-split-*-of-00003.gguf"))
    assert first == parts[0] and len(parts) == 3
    files = {part.name: HostedFile(part.read_bytes()) for part in parts}
    files[parts[1].name].cut_after, files[parts[1].name].cuts_left = 1000, 1  # the network drops in part 2
    whole = sum(part.stat().st_size for part in parts)
    with hub_serving({REPO: Repo(files)}) as hub:
        later = hearth(isolated_home, hub, "models", "install", f"hf:{REPO}/{parts[1].name}")
        assert later.returncode == 1 and f"{parts[1].name} is part 2 of a model split into 3 files" in later.stderr
        assert f"Name its first part, {parts[0].name}" in later.stderr
        found = hearth(isolated_home, hub, "models", "search", "tiny")
        [listed] = [line for line in found.stdout.splitlines() if line.startswith("  ")]
        assert listed.startswith(f"  {parts[0].name}\t") and listed.split("\t")[1] == format_bytes(whole), listed

        cut = hearth(isolated_home, hub, "models", "install", f"hf:{REPO}/{parts[0].name}")
        assert cut.returncode == 1 and f"The download of {parts[1].name} from" in cut.stderr, cut.stderr[-2000:]
        assert f"Install it again to go on from there: hearth models install hf:{REPO}/{parts[0].name}" in cut.stderr
        done = hearth(isolated_home, hub, "models", "install", f"hf:{REPO}/{parts[0].name}")
        assert done.returncode == 0, done.stderr
        fetched = [(path.rsplit("/", 1)[1], asked) for method, path, asked in hub.requests if "/resolve/" in path]
        assert fetched == [  # part 1 once; part 2 cut, then only its rest; part 3 once
            (parts[0].name, ""),
            (parts[1].name, ""),
            (parts[1].name, "bytes=1000-"),
            (parts[2].name, ""),
        ]
    [row] = installed(isolated_home, hub)
    assert Path(str(row["path"])) == isolated_home / "models" / "tiny-split" / parts[0].name
    assert models_folder_files(isolated_home) == [f"tiny-split/{part.name}" for part in parts]
    removed = hearth(isolated_home, hub, "models", "remove", str(row["sha256"])[:12])
    assert removed.returncode == 0, removed.stderr
    assert models_folder_files(isolated_home) == [] and not (isolated_home / "models" / "tiny-split").exists()
