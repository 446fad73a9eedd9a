"""Fetching one GGUF file from the Hugging Face Hub with ``huggingface_hub``'s own client: the address (``HF_ENDPOINT``
for a mirror), the account's token (``HF_TOKEN`` or the Hugging Face login, sent as the library sends it and never
kept by Hearth) and its error types. Only a person's install asks for it.

The bytes go to a partial file of Hearth's own that outlives the process, so an install cut off (by the network, a
cancel or the machine) goes on from where it stopped when it is run again (an HTTP Range request); the library's own
download keeps no partial file across runs. The file's SHA-256 is computed as the bytes arrive and checked against
the hub's listing before anything is installed.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from models.hub import (
    HubAccessRefused,
    HubFacts,
    HubFile,
    HubFileRefused,
    HubListing,
    HubNotFound,
    HubUnreachable,
    gguf_files,
)
from models.install import MARGIN_BYTES, InstallCancelled, InstallProgress, NotEnoughDisk, nearest_existing
from models.shared.cancel import CancelToken
from models.shared.wording import format_bytes

CHUNK_BYTES = 1 << 20
PROGRESS_EVERY_S = 0.25
GO_ON_FROM_THE_PAGE = "Install it again from the Models tab: it goes on from where it stopped."
TIMEOUT_S = 30.0  # between two pieces of an answer: a stalled link is named, not waited on


@contextmanager
def hub_reachable() -> Iterator[None]:
    """The hub allowed for what runs inside: Hearth keeps ``huggingface_hub`` offline everywhere else (the embedding
    and tokenizer code must never look anything up), and a person's install is the one exception. Whether the person
    keeps the hub off themselves (their own ``HF_HUB_OFFLINE``) is the caller's to check first."""
    from huggingface_hub import constants

    before = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = False
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = before


def listing(hub_file: HubFile) -> list[dict[str, Any]]:
    """The repository's files as the hub lists them (name, size, LFS SHA-256): one request, from which both the file
    a repository named alone gets (:func:`models.hub.gguf_files`) and a file's facts (:func:`models.hub.facts_of`)
    are read."""
    from huggingface_hub import HfApi

    with hub_reachable(), _named_errors(hub_file):
        info = HfApi().model_info(hub_file.repo, files_metadata=True, timeout=TIMEOUT_S)
    return _as_listing(info.siblings or [])


def search(text: str, limit: int) -> list[HubListing]:
    """The GGUF repositories on the hub whose names match ``text``, most downloaded first, each with its single-file
    GGUFs and their sizes (one listing request per repository found). The search is one request, asked once: the
    library's own listing retries a hub it cannot reach for half a minute, too long to be told it is offline."""
    from huggingface_hub import HfApi, constants, get_session, hf_raise_for_status
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils._headers import build_hf_headers

    api = HfApi()
    params: dict[str, str | int] = {"search": text, "filter": "gguf", "sort": "downloads", "limit": limit}
    listings = []
    with hub_reachable(), _named_errors(None):
        answer = get_session().get(
            f"{constants.ENDPOINT}/api/models", params=params, headers=build_hf_headers(), timeout=TIMEOUT_S
        )
        hf_raise_for_status(answer)
        found = [str(item["id"]) for item in answer.json() if isinstance(item, dict) and "id" in item][:limit]
        for repo in found:
            try:
                info = api.model_info(repo, files_metadata=True, timeout=TIMEOUT_S)
            except HfHubHTTPError:  # one repository that cannot be listed does not end the search
                continue
            files = gguf_files(_as_listing(info.siblings or []))
            if files:
                listings.append(HubListing(repo, files))
    return listings


def _as_listing(siblings: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "rfilename": s.rfilename,
            "size": s.size,
            "lfs": {"sha256": s.lfs.sha256, "size": s.lfs.size} if s.lfs is not None else None,
        }
        for s in siblings
    ]


def check_space(files: Sequence[tuple[HubFacts, Path]]) -> None:
    """Room for what is still to come of each file (its facts, and where its bytes gather), with a margin for
    everything else on the disk."""
    have = sum(partial.stat().st_size for _, partial in files if partial.exists())
    wanted = sum(facts.size for facts, _ in files)
    folder = files[0][1].parent
    missing = wanted - have + MARGIN_BYTES - shutil.disk_usage(nearest_existing(folder)).free
    if missing > 0:
        raise NotEnoughDisk(
            f"Not enough free disk space for this model: {format_bytes(missing)} more is needed on the disk "
            f"holding {folder}.",
            f"Free at least {format_bytes(missing)} there (delete files or models you no longer use), then install "
            "it again; what was downloaded is kept.",
        )


def fetch(
    hub_file: HubFile, facts: HubFacts, partial: Path, cancel: CancelToken, asked: str = ""
) -> Iterator[InstallProgress]:
    """Bring ``partial`` up to the whole file, from where an earlier run left it; yields progress. The partial file
    is kept when the download is cut or cancelled (the next run goes on from it) and removed when its bytes turn
    out not to be the file's: :class:`HubFileRefused`. ``asked``: what the person installs, when ``hub_file`` is one
    part of it (what to install again is named by it)."""
    again = f"Install it again to go on from there: hearth models install {asked or hub_file.reference}"
    from huggingface_hub import get_session, hf_hub_url, hf_raise_for_status
    from huggingface_hub.utils._headers import build_hf_headers  # the token as the library sends it

    partial.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    digest = hashlib.sha256()
    have = _hash_into(digest, partial, facts.size)
    total = facts.size
    if have < total:
        headers = build_hf_headers()
        if have:
            headers["Range"] = f"bytes={have}-"
        url = hf_hub_url(hub_file.repo, hub_file.filename)
        shown = f"{hub_file.filename} ({format_bytes(total)})"
        yield InstallProgress("download", have / total, f"Downloading {shown}: {format_bytes(have)} so far")
        with (
            hub_reachable(),
            _named_errors(hub_file, downloading=True, go_on=again),
            get_session().stream("GET", url, headers=headers, follow_redirects=True, timeout=TIMEOUT_S) as answer,
        ):
            hf_raise_for_status(answer)
            if have and answer.status_code != 206:  # the server sent the whole file again: start over
                digest, have = hashlib.sha256(), 0
            pace = _Pace(have, total)
            with partial.open("r+b" if have else "wb") as out:
                out.seek(have)
                out.truncate()
                shown_at = 0.0
                for piece in answer.iter_bytes():  # as it arrives: a cut loses nothing already received
                    if have + len(piece) > total:
                        raise _refused(hub_file, partial, f"the hub sent more than its {format_bytes(total)}")
                    out.write(piece)
                    digest.update(piece)
                    have += len(piece)
                    if time.monotonic() - shown_at >= PROGRESS_EVERY_S or have == total:
                        shown_at = time.monotonic()
                        yield InstallProgress("download", have / total, f"Downloading {shown}: {pace.said(have)}")
                    if cancel.cancelled:
                        raise InstallCancelled(
                            f"Downloading {hub_file.filename} was stopped at {format_bytes(have)} of "
                            f"{format_bytes(total)}; nothing was installed.",
                            again,
                            page_remedy=GO_ON_FROM_THE_PAGE,
                        )
        if have < total:
            raise HubUnreachable(
                f"The download of {hub_file.filename} ended at {format_bytes(have)} of {format_bytes(total)}.",
                again,
                page_remedy=GO_ON_FROM_THE_PAGE,
            )
    if digest.hexdigest() != facts.sha256:
        raise _refused(hub_file, partial, f"its bytes do not match the SHA-256 the hub lists ({facts.sha256[:12]}…)")


class _Pace:
    """How far a download has got, how fast this run goes and about how long the rest takes."""

    def __init__(self, start: int, total: int) -> None:
        self._start, self._total, self._began = start, total, time.monotonic()

    def said(self, have: int) -> str:
        done = f"{format_bytes(have)} ({100 * have // self._total}%)"
        elapsed = time.monotonic() - self._began
        if elapsed < 1.0 or have <= self._start:
            return done
        rate = (have - self._start) / elapsed
        left = (self._total - have) / rate
        return f"{done}, {format_bytes(int(rate))}/s, about {_duration(left)} left"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _hash_into(digest: Any, partial: Path, total: int) -> int:
    """What an earlier run left, read into ``digest``; a partial file longer than the file is started over."""
    if not partial.exists():
        return 0
    size = partial.stat().st_size
    if size > total:
        partial.unlink()
        return 0
    with partial.open("rb") as kept:
        while block := kept.read(CHUNK_BYTES * 8):
            digest.update(block)
    return size


def _refused(hub_file: HubFile, partial: Path, why: str) -> HubFileRefused:
    partial.unlink(missing_ok=True)
    return HubFileRefused(
        f"{hub_file.filename} from {hub_file.repo} was refused: {why}. Nothing was installed.",
        "Try again later (a mirror or proxy may have served a damaged copy); if it happens again, pick another file.",
    )


@contextmanager
def _named_errors(hub_file: HubFile | None, downloading: bool = False, go_on: str = "") -> Iterator[None]:
    """``huggingface_hub``'s and the network's errors as Hearth's, each with what to do (``hub_file``: the file asked
    for; None for a search)."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )

    where = constants.ENDPOINT
    again = "install again" if hub_file is not None else "search again"
    try:
        yield
    except OfflineModeIsEnabled:
        raise HubUnreachable(
            "HF_HUB_OFFLINE is set, so nothing is fetched from the Hugging Face Hub.",
            "Unset HF_HUB_OFFLINE to install from the hub or search it.",
        ) from None
    except HfHubHTTPError as exc:
        if hub_file is not None:
            _name_file_error(exc, hub_file, where, (GatedRepoError, RepositoryNotFoundError, EntryNotFoundError))
        status = exc.response.status_code if exc.response is not None else "no answer"
        raise HubUnreachable(
            f"{where} answered {status} to {hub_file.reference if hub_file else 'the search'}.",
            f"Try again later; with a mirror, check HF_ENDPOINT and {again}.",
        ) from None
    except httpx2.TransportError as exc:
        if downloading and hub_file is not None:
            raise HubUnreachable(
                f"The download of {hub_file.filename} from {where} was cut off ({type(exc).__name__}).",
                go_on or f"Install it again to go on from there: hearth models install {hub_file.reference}",
                page_remedy=GO_ON_FROM_THE_PAGE,
            ) from None
        raise HubUnreachable(
            f"The Hugging Face Hub at {where} cannot be reached ({type(exc).__name__}).",
            f"Check the network (or HF_ENDPOINT, for a mirror) and {again}.",
        ) from None


def _name_file_error(error: Exception, hub_file: HubFile, where: str, kinds: tuple[type[Exception], ...]) -> None:
    """The hub's refusal of one file said as what it means, when it is one of ``kinds`` (gated, no such
    repository, no such file); otherwise returns."""
    gated, no_repo, no_entry = kinds
    if isinstance(error, gated):
        raise HubAccessRefused(
            f"{hub_file.repo} is gated: its makers ask each account to accept their terms before downloading.",
            f"Accept them on {where}/{hub_file.repo} while logged in, then set HF_TOKEN to a token of that account "
            "(or log in with `hf auth login`) and install again.",
        ) from None
    if isinstance(error, no_repo):
        raise HubNotFound(
            f"There is no repository {hub_file.repo} on {where} (or it is private).",
            "Check the name on the hub; for a private one, set HF_TOKEN to a token that may read it.",
        ) from None
    if isinstance(error, no_entry):
        raise HubNotFound(
            f"{hub_file.repo} has no file {hub_file.filename}.", "Check the file's name in the repository's Files tab."
        ) from None
