"""The texts of a llama.cpp vocabulary's special tokens: those a prompt read with special tokens recognised turns
into single tokens (control tokens such as ``<|im_start|>``, and user-defined ones such as ``<tool_call>``)."""

from __future__ import annotations

from typing import Any


def special_texts(vocab: Any) -> list[str]:
    import llama_cpp

    wanted = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
    found = []
    for token in range(llama_cpp.llama_vocab_n_tokens(vocab)):
        if llama_cpp.llama_vocab_get_attr(vocab, token) & wanted:
            text = llama_cpp.llama_vocab_get_text(vocab, token)
            if text:
                found.append(text.decode("utf-8", errors="replace"))
    return found
