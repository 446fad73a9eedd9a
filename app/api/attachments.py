"""Files sent with an API request (``file`` content parts, ``hearth.attachments``): decoded, written to a private
scratch folder only while they are read (in the reader process, under the same limits as a collection's files),
then forgotten. The API keeps no conversation, so nothing of them is stored."""

from __future__ import annotations

import base64
import binascii
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.api.errors import RequestInvalid
from app.api.schemas import AttachedFile
from backends.base import CancelToken
from rag.attachments import ReadAttachment

if TYPE_CHECKING:
    from app.services.library.documents import DocumentServices

_DATA_URL = re.compile(r"^data:[^,]*?;base64,", re.IGNORECASE)


@dataclass(frozen=True)
class SentFile:
    name: str  # the name it is shown and cited by (the client's, without folders)
    data: bytes


def decode_files(files: Sequence[AttachedFile]) -> list[SentFile]:
    """The files' bytes, or :class:`RequestInvalid` naming the first that is not base64."""
    decoded: list[SentFile] = []
    for file in files:
        name = Path(file.filename.replace("\\", "/")).name or "file"
        text = _DATA_URL.sub("", (file.file_data or "").strip(), count=1)
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise RequestInvalid(
                f"The file {name!r} is not base64: its file_data cannot be read.",
                "Send the file's bytes as base64, or as a data URL like data:application/pdf;base64,…",
                param="file_data",
            ) from None
        decoded.append(SentFile(name, data))
    return decoded


def read_sent_files(
    files: Sequence[SentFile], scratch: Path, documents: DocumentServices, cancel: CancelToken
) -> list[ReadAttachment] | None:
    """Read, split and embed each file (``None`` if cancelled); :class:`RequestInvalid` with the reason for the
    first that cannot be read. Nothing is kept either way."""
    from rag.attachments import read_attachment
    from rag.reading.reader import ReadCancelled, drain
    from rag.reading.sections import Skipped

    reader = documents.attachment_reader
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    read: list[ReadAttachment] = []
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        for number, file in enumerate(files):
            # The client's name only for its suffix (what kind of file it is); the path is Hearth's own.
            path = Path(folder) / f"{number}{Path(file.name).suffix.lower()}"
            path.write_bytes(file.data)
            try:
                steps = read_attachment(
                    path, reader, documents.embedder, documents.max_file_bytes, cancel, name=file.name
                )
                read.append(drain(steps))
            except ReadCancelled:
                return None
            except Skipped as skipped:
                raise RequestInvalid(
                    f"The file {file.name!r} cannot be used: {skipped.reason}.",
                    "Send a PDF, Word, HTML, Markdown, text or CSV file with text in it.",
                    param="file",
                ) from None
            finally:
                path.unlink(missing_ok=True)
    return read
