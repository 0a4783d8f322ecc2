"""`dynamo-lab cluster down` and the processes it counts as the cluster's."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT


def test_cluster_down_does_not_count_the_command_that_started_it_as_the_cluster(tmp_path):
    """`python3 dev.py cluster down --state DIR` (or sudo) names the directory too, as its parent."""
    state = tmp_path / "state"
    wrapper = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[2:]).returncode)"
    done = subprocess.run([sys.executable, "-c", wrapper, str(state), sys.executable, "-m", "infra.lab", "cluster",
                           "down", "--state", str(state)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "cluster: down; nothing left running\n", "")
