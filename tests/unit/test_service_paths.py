"""Services that find files of the project by their own place in the tree still find them after the folders moved:
the held-out text the quantization ladder measures on, and the root a child process (a tuning run, the speed
measurement) is given on its PYTHONPATH."""

from __future__ import annotations

from app.services.catalog.models import HELDOUT_TEXT
from app.services.training import tuning, tuning_estimate


def test_the_held_out_text_and_the_project_root_are_found() -> None:
    assert HELDOUT_TEXT.is_file()
    for root in (tuning._PROJECT_ROOT, tuning_estimate._PROJECT_ROOT):
        assert (root / "app" / "__init__.py").is_file() and (root / "models" / "__init__.py").is_file()
