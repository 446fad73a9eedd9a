"""Chroma's HTTP client with every answer bounded (``rag.chroma_http``) from its first request on.

Chroma's own client makes its ``httpx.Client`` without a timeout and asks the server who is asking, and for its
tenant and database, while it is built: a server that passed the heartbeat and then never answered would hold that
for ever. This client bounds the session just before its first request (the identity it asks for first)."""

from __future__ import annotations

from typing import Any

import httpx
from chromadb.api.client import Client

from rag import chroma_http


class BoundedClient(Client):
    def get_user_identity(self) -> Any:
        session = getattr(self._server, "_session", None)
        if isinstance(session, httpx.Client):
            session.timeout = httpx.Timeout(chroma_http.READ_TIMEOUT_S)
            chroma_http.bound(session, deadline_s=chroma_http.DEADLINE_S)
        return super().get_user_identity()
