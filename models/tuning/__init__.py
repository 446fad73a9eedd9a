"""LoRA tuning of the model the user chats with, on the CPU (or a GPU), against the very GGUF it runs.

``dataset`` reads and checks the training data, ``options`` holds the settings and their presets, ``encode``
turns examples into token ids with the loss on the answers only, ``plan`` estimates memory and time, ``runs``
is the on-disk record of a run (its job, events and checkpoints) that the page, the CLI and the training
process share, ``worker`` is the training process itself (transformers + peft), ``lora_gguf`` writes and
checks adapters in llama.cpp's GGUF LoRA format, and ``perplexity`` measures an adapter through llama.cpp.
"""
