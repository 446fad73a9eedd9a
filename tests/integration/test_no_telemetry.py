"""Importing OpenVINO must not phone home. Its converter sends a usage event through openvino_telemetry whenever
no consent file exists, except in CI, so this runs the import with CI unset and watches every name lookup."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

PROGRAM = """
import sys
# Printed, not collected: the telemetry sender runs in a forked child, which inherits this hook and stdout.
sys.addaudithook(lambda event, args: print("LOOKUP", args[0], flush=True) if event == "socket.getaddrinfo" else None)
from app.services.container import enforce_offline
enforce_offline()
from backends.hardware import probe
inventory = probe()
assert inventory.openvino, "OpenVINO should be usable here"
import openvino, openvino_genai
assert sys.modules.get("openvino_telemetry") is None, "the telemetry module was imported"
import time
time.sleep(1)  # time for a forked sender to show itself, if there were one
print("done")
"""


def test_importing_openvino_sends_nothing(tmp_path: object) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TF_BUILD", "JENKINS_URL")}
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "done" in result.stdout
    assert "LOOKUP" not in result.stdout, result.stdout
