"""`dynamo-lab pr-preview BASE HEAD` on two real commits: BASE deployed by the real engine on a fresh
local cluster, then the real `pulumi preview --diff` of HEAD (the program and stack file of each
commit). The commits are made here, in a copy of this checkout."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
import yaml

from infra.lab.cluster import local
from tests.lab.cluster.test_deploy import copy_checkout

pytestmark = pytest.mark.cluster


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture()
def two_commits(tmp_path) -> tuple[Path, str, str]:
    """A repository of this checkout's files (committed or not), and a second commit on it that
    changes one key of one stack file: cross-server's decode replicas, 2 -> 1."""
    repo = copy_checkout(tmp_path / "repo")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD")
    stack_file = repo / "Pulumi.cross-server.yaml"
    doc = yaml.safe_load(stack_file.read_text())
    (decode,) = [w for w in doc["config"]["dynamo-lab:workers"] if w["name"] == "decode"]
    assert decode["replicas"] == 2
    stack_file.write_text(stack_file.read_text().replace("      replicas: 2\n      gpuClass: gpu-24gb",
                                                         "      replicas: 1\n      gpuClass: gpu-24gb"))
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "one decode worker")
    return repo, base, _git(repo, "rev-parse", "HEAD")


def test_pr_preview_prints_the_real_engines_diff_of_head_against_base_deployed(two_commits, cluster_bins,
                                                                                engine_bins, dgd_crd_dir):
    # dgd_crd_dir: pr-preview applies Dynamo's CRD as every local deployment does; without it at hand
    # this test skips with the reason, as the tier's others do, rather than fail.
    repo, base, head = two_commits
    out = io.StringIO()
    assert local.pr_preview(base, head, ["cross-server"], out=out, repo=repo, log=lambda m: None) == 0
    text = out.getvalue()
    assert f"of {head[:12]} against {base[:12]}" in text and "## cross-server" in text
    assert "replicas: 2 => 1" in text, text[-4000:]
    assert "1 to update" in text, text[-4000:]
    assert "to create" not in text and "to delete" not in text, text[-4000:]
