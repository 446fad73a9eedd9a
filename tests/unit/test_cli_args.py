import pytest

from app.api.policy import is_loopback
from app.cli.main import settings_overrides
from app.cli.parser import build_parser


def test_flags_map_onto_the_settings_tree() -> None:
    flags = ["--context", "2048", "--temperature", "0", "--backend", "fake", "--max-tokens", "9", "--kv-cache", "q8_0"]
    args = build_parser().parse_args(["chat", "hi", *flags])
    assert settings_overrides(args) == {
        "model": {"context_length": 2048},
        "backend": {"name": "fake", "kv_cache_type": "q8_0"},
        "generation": {"temperature": 0.0, "max_new_tokens": 9},
    }


def test_unset_flags_leave_settings_alone() -> None:
    assert settings_overrides(build_parser().parse_args(["doctor"])) == {}


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("0.0.0.0", False), ("192.168.1.4", False)],
)
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
