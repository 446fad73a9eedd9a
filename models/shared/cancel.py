"""The token that stops a running job: a generation at its next token, a download, a conversion. In the lowest
layer, because the model-file jobs below the engines stop on it as the engines do."""

from __future__ import annotations

import threading


class CancelToken:
    """Set from any thread to stop a running generation at the next token."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()
