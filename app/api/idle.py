"""Connections that keep Hearth waiting are closed.

uvicorn closes a keep-alive connection a few seconds after a response, but a connection that never finishes its
request (no bytes at all, half a header, a body that stops arriving) stays open for as long as the client likes:
a hundred of them stayed open indefinitely. This protocol closes a connection when Hearth has been waiting on the
client for ``idle_s`` with nothing arriving. A client that has sent its whole request and is reading a long
answer (an event stream) is never cut: then Hearth is not waiting on it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

# h11's states of the client's side in which the server is waiting for the client to send something.
_WAITING_ON_CLIENT = (h11.IDLE, h11.SEND_BODY)


class IdleClosingH11Protocol(H11Protocol):
    idle_s = 60.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._idle_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._idle_timer = self.loop.call_later(self.idle_s, self._on_idle)

    def _disarm(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _on_idle(self) -> None:
        self._idle_timer = None
        if self.transport.is_closing():
            return
        if self.conn.their_state not in _WAITING_ON_CLIENT:
            self._arm()  # the request is in; the answer may take as long as it takes
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # the app sees the client as gone (a body that stopped arriving)
            self.cycle.message_event.set()
        self.transport.close()


def idle_closing_protocol(idle_s: float) -> type[IdleClosingH11Protocol]:
    """The protocol class for uvicorn's ``http`` setting, closing after ``idle_s`` of waiting."""
    return type("IdleClosingH11Protocol", (IdleClosingH11Protocol,), {"idle_s": idle_s})
