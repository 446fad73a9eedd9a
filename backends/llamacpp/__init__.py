"""llama.cpp: the backend (``backend``), its batching engine over the C API (``batch``, ``native``) and their
pure rules (sampler chains, slot policy, prompt-lookup drafts), and what the installed build can load."""
