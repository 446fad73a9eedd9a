"""llama.cpp's AMX weight buffers crash the process (llama.cpp#20824): Hearth turns extra buffer types off on
CPUs with AMX and leaves llama.cpp's choice everywhere else."""

from types import SimpleNamespace

import pytest

from backends.llamacpp import buffers as llamacpp_buffers
from backends.llamacpp.buffers import extra_buffers_safe


@pytest.mark.parametrize(
    ("flags", "safe"),
    [
        ({"avx2", "fma"}, True),  # an AVX2 laptop
        ({"avx512f", "avx512_vnni", "avx512_bf16"}, True),  # AVX-512 without AMX
        ({"avx512f", "amx_tile", "amx_int8", "amx_bf16"}, False),  # Sapphire Rapids
        (set(), True),
    ],
)
def test_extra_buffers_are_kept_off_only_where_amx_is(flags: set[str], safe: bool) -> None:
    assert extra_buffers_safe(flags) is safe


def test_apply_turns_extra_buffers_off_on_an_amx_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llamacpp_buffers, "this_cpu_allows_extra_buffers", lambda: False)
    assert llamacpp_buffers.apply(SimpleNamespace(use_extra_bufts=True)).use_extra_bufts is False
    monkeypatch.setattr(llamacpp_buffers, "this_cpu_allows_extra_buffers", lambda: True)
    assert llamacpp_buffers.apply(SimpleNamespace(use_extra_bufts=True)).use_extra_bufts is True
