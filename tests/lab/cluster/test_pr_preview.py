"""`dynamo-lab pr-preview BASE HEAD` on two real commits: BASE deployed by the real engine on a fresh
local cluster, then the real `pulumi preview --diff` of HEAD (the program and stack file of each
commit). The commits are made here, in a copy of this checkout."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
import yaml

from dynamo_lab.local_cluster import local
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


def test_pr_preview_refuses_a_stack_file_over_the_bound_and_still_previews_the_others(two_commits, cluster_bins,
                                                                                       engine_bins, dgd_crd_dir,
                                                                                       monkeypatch):
    # The pull request's Pulumi.huge.yaml is past the stack reader's 256 KiB. The engine would read it
    # as root (pulumi_workspace.prepare) and the base would be deployed for it: neither happens.
    repo, base, _ = two_commits
    shipped = (repo / "Pulumi.cross-server.yaml").read_text()
    _git(repo, "checkout", "-q", base)
    (repo / "Pulumi.huge.yaml").write_text(shipped)  # in the base: a stack the preview would deploy first
    _git(repo, "add", "Pulumi.huge.yaml")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base with huge")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / "Pulumi.huge.yaml").write_text(shipped + "#" * (300 * 1024) + "\n")
    (repo / "Pulumi.cross-server.yaml").write_text(shipped)  # the head's decode replicas, 2 -> 1
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "a huge stack file")
    head = _git(repo, "rev-parse", "HEAD")
    ran: list[tuple[str, str]] = []
    real_invoke = local.pulumi_cli.invoke

    def invoke(action, ws, bins, **kw):
        ran.append((action, ws.stack))
        return real_invoke(action, ws, bins, **kw)

    monkeypatch.setattr(local.pulumi_cli, "invoke", invoke)
    out = io.StringIO()
    assert local.pr_preview(base, head, ["huge", "cross-server"], out=out, repo=repo, log=lambda m: None) == 1
    text = out.getvalue()
    huge = text.split("## huge\n")[1].split("\n## ")[0]
    assert huge == (f"STACK FILE REFUSED: {head}'s Pulumi.huge.yaml cannot be read as a stack file (more than 256 KiB, "
                    "where a stack file is a few kilobytes; is it the right file?); huge is neither deployed nor "
                    "previewed\n")
    assert ran == [("up", "cross-server"), ("preview", "cross-server")]  # nothing ran for huge
    cross = text.split("## cross-server\n")[1]
    assert "replicas: 2 => 1" in cross and "1 to update" in cross, cross[-4000:]
