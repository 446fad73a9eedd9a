"""The engine process: one loaded model in a child process of its own.

llama.cpp aborts its host process on some failures instead of raising (a dead RPC worker, a GGML_ASSERT, the
OOM killer), so the model never lives in the web server's process. ``client.EngineProcess`` starts
``python -m backends.engine`` and talks to it over a socket pair with the typed messages of ``protocol``;
``server`` is the child's side. Supervision (restarts, leases, switching) is the runtime's job
(``app.services.serving.runtime``); this package only runs one engine and reports how it ended.
"""
