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


# A module past this does several jobs; split it by job (docs/architecture.md's module map).
MODULE_LINES_MAX = 400


def test_no_module_of_the_package_is_over_the_line_budget():
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "infra").rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MODULE_LINES_MAX}
    assert long == {}, f"split these by job: each module of infra/ holds at most {MODULE_LINES_MAX} lines"
