"""Server-sent events as OpenAI clients read them: ``data: {json}`` blocks, then ``data: [DONE]``.

Every payload is ASCII-only JSON on one line. JSON escapes control characters anyway, but clients split lines
with ``str.splitlines()``, which also breaks at U+2028, U+0085 and friends: a token holding one of those would
tear its chunk in two. Escaping all non-ASCII text keeps every token intact, whatever the model writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

DONE = b"data: [DONE]\n\n"


def sse_event(payload: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n\n"
