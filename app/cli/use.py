"""``hearth use``: switch the running Hearth's model, backend, device or context (what the Models and Hardware
tabs do); with no Hearth running, make a model the default for the next start."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from typing import Any

from app.paths import ensure_data_dir, resolve_data_paths
from app.services.serving.instance import read_record
from app.settings import Settings
from app.terminal_text import for_terminal
from models.shared.errors import HearthError

# A switch waits for the answers being written, then loads; a big model on a slow disk takes minutes.
SWITCH_TIMEOUT_S = 900


def run_use(
    settings: Settings,
    model: str | None,
    backend: str | None,
    device: str | None,
    context_length: int | None,
    cancel_running: bool,
) -> int:
    if not any((model, backend, device, context_length)):
        raise HearthError("Nothing to change.", "Name a model, or pass --backend, --device or --context.")
    paths = ensure_data_dir(resolve_data_paths(settings.home))
    record = read_record(paths.server_file)
    if record is None:
        return _set_default(settings, model, backend or device or context_length)
    from app.api.keys import ApiKeyStore

    wanted = {
        "model": model,
        "backend": backend,
        "device": device,
        "context_length": context_length,
        "cancel_running": cancel_running,
    }
    how = "stopping the answers being written" if cancel_running else "after the answers being written"
    print(f"Switching the Hearth running at {record.url} ({how})…", file=sys.stderr, flush=True)
    status = _post(f"{record.api_url}/hearth/switch", wanted, ApiKeyStore(paths.api_key_file).get())
    model, backend = for_terminal(status["model"]), for_terminal(status["backend"])
    print(f"Now running {model} on {backend}, context {status['context_length']} tokens.")
    return 0


def run_cancel_load(settings: Settings) -> int:
    """Stop the running Hearth's model load (a stuck one): the model that served before keeps serving."""
    paths = ensure_data_dir(resolve_data_paths(settings.home))
    record = read_record(paths.server_file)
    if record is None:
        raise HearthError("Hearth is not running, so no model is loading.", "Start it with `hearth ui`.")
    from app.api.keys import ApiKeyStore

    status = _post(f"{record.api_url}/hearth/cancel-load", {}, ApiKeyStore(paths.api_key_file).get())
    if not status["cancelled"]:
        print(f"No model was loading; {for_terminal(status['model'] or 'no model')} is {status['state']}.")
        return 0
    print("Cancelled the load; the model that was serving keeps serving.")
    return 0


def _set_default(settings: Settings, model: str | None, running_only: object) -> int:
    if running_only:
        raise HearthError(
            "Hearth is not running, so there is no backend, device or context to switch.",
            "Start it with those flags instead, e.g. `hearth ui --backend llamacpp --context 8192`.",
        )
    assert model is not None
    from app.services.catalog.models import open_model_store

    store = open_model_store(resolve_data_paths(settings.home))
    try:
        stored = store.set_default(model)
    finally:
        store.close()
    print(f"Hearth is not running; it will start with {for_terminal(stored.path.name)} ({stored.id}).")
    return 0


def _post(url: str, body: dict[str, Any], key: str) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=SWITCH_TIMEOUT_S) as response:
            return dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read())["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {exc.code}"
        raise HearthError(
            f"The running Hearth refused: {message}", "Nothing was changed; the model that was running still is."
        ) from None
    except (urllib.error.URLError, TimeoutError) as exc:
        raise HearthError(
            f"Could not reach the running Hearth at {url}: {exc}.", "Check that `hearth ui` is still running."
        ) from None
