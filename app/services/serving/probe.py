"""The first answer a freshly loaded model must give before Hearth lets it serve: one token for "Hi", within a
time limit. It exercises what loading alone does not: the chat template, the first decode, the sampler. A model
that fails it, or never finishes it, is treated as a model that failed to load, so it never becomes the one chat
uses, nor the default after a restart."""

from __future__ import annotations

import threading

from backends.base import CancelToken, ChatMessage, GenerationParams
from backends.engine.base import Engine
from models.shared.errors import HearthError, ModelLoadError, WorkersStopped

PROBE_MESSAGES = (ChatMessage("user", "Hi"),)
PROBE_PARAMS = GenerationParams(temperature=0.0, max_new_tokens=1, repeat_penalty=1.0)
# Generous: the first answer of a big model on a slow disk pages its whole weight file in.
PROBE_TIMEOUT_S = 120.0


def answer_first_question(engine: Engine, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise :class:`ModelLoadError` unless ``engine`` answers a one-token question within ``timeout_s``.
    An engine that does not answer in time is killed (a stuck engine does not hear a cancel)."""
    name = engine.model.display_name
    expired = threading.Event()

    def give_up() -> None:
        expired.set()
        engine.abort()

    timer = threading.Timer(timeout_s, give_up)
    timer.daemon = True
    timer.start()
    try:
        for _ in engine.stream_chat(PROBE_MESSAGES, PROBE_PARAMS, CancelToken()):
            pass
    except WorkersStopped:
        raise  # the load is tried again without them
    except HearthError as exc:
        if expired.is_set():
            raise _too_slow(name, timeout_s) from exc
        raise ModelLoadError(f"{name} loaded but could not answer a first question: {exc.message}", exc.remedy) from exc
    finally:
        timer.cancel()
    if expired.is_set():
        raise _too_slow(name, timeout_s)


def _too_slow(name: str, timeout_s: float) -> ModelLoadError:
    return ModelLoadError(
        f"{name} loaded but did not answer a first question within {timeout_s:.0f} s.",
        "It may be damaged or too slow for this machine; try another model or a smaller quantization.",
    )
