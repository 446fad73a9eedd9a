"""The OpenAI-compatible local API, served under ``/v1`` on the same port as the page.

Modules, from pure to effectful: ``schemas`` (requests as typed models), ``errors`` (typed errors to HTTP),
``ids`` (which model ids name what), ``policy`` (Host, Origin and key rules), ``responses`` and ``sse`` (the
JSON and event-stream shapes), ``keys`` (the key file), ``answers`` (one answer on a worker thread),
``prompting`` (messages and parameters for the engine), ``routes``, ``middleware`` and ``server``.
"""
