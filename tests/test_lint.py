"""Lint is part of the test command, so CI and `python3 dev.py test` agree on it."""

import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT


def test_ruff_reports_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is pinned in the dev group of uv.lock"
    proc = subprocess.run([ruff, "check", "."], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
