"""Loading through the runtime with real files: each bad input gives a typed error with a remedy."""

from pathlib import Path

import pytest

from app.services.container import build_services
from app.settings import load_settings
from models.shared.errors import DoesNotFit, HearthError, ModelFileError
from tests.helpers import make_inventory

pytestmark = pytest.mark.integration


def load(model: Path, context: int = 2048, ram_gib: float = 16.0) -> None:
    settings = load_settings(model={"path": model, "context_length": context})
    services = build_services(settings, inventory=make_inventory(ram_available_gib=ram_gib))
    try:
        list(services.runtime.load(services.model_choice()))
        assert services.runtime.status.state == "ready"
    finally:
        services.close()


def test_the_embedded_model_loads(embedded_model: Path, llama_cpp_installed: None) -> None:
    load(embedded_model)


def test_a_truncated_copy_of_the_real_model(embedded_model: Path, tmp_path: Path) -> None:
    truncated = tmp_path / "half.gguf"
    with embedded_model.open("rb") as source:
        truncated.write_bytes(source.read(embedded_model.stat().st_size // 2))
    with pytest.raises(ModelFileError, match="truncated") as caught:
        load(truncated)
    assert "Download the model again" in caught.value.remedy


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("missing.gguf", None, "not found"),
        ("photo.gguf", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "not a GGUF file"),
        ("empty.gguf", b"", "empty"),
    ],
)
def test_files_that_are_not_models(tmp_path: Path, name: str, content: bytes | None, match: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(HearthError, match=match):
        load(path)


def test_a_model_that_does_not_fit_in_ram(embedded_model: Path) -> None:
    with pytest.raises(DoesNotFit) as caught:
        load(embedded_model, context=8192, ram_gib=0.8)
    allowed = int(caught.value.remedy.split("Lower the context to ")[1].split()[0])
    assert 256 <= allowed < 8192
    load(embedded_model, context=allowed, ram_gib=0.8)  # the advice works
    with pytest.raises(DoesNotFit) as hopeless:
        load(embedded_model, context=256, ram_gib=0.55)
    assert hopeless.value.remedy == "Close other programs, or choose a smaller or lower-bit model."
