"""OpenVINO GenAI on the same GGUF file: the backend (``backend``) and where it can run a model (``placement``)."""
