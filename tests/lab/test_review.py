"""Golden renders and the offline `diff` command."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from infra.lab import review
from tests.helpers import ROOT, STACKS, run_cli


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("variant", [None, *review.VARIANTS])
def test_golden_render_is_current(stack, variant):
    golden = review.golden_path(ROOT, stack, variant)
    assert golden.is_file(), "run: python3 dev.py golden"
    assert review.render_yaml(stack, variant=variant) == golden.read_text(), (
        f"{golden.name} is stale: run `python3 dev.py golden`, review the diff, commit it")


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def project_repo(tmp_path):
    """A throwaway git repo holding the project (code + stack files), committed on main."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copytree(ROOT / "infra", repo / "infra", ignore=shutil.ignore_patterns("__pycache__"))
    for p in ROOT.glob("Pulumi*.yaml"):
        shutil.copy(p, repo / p.name)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return repo


def _diff(repo, *args):
    """`dynamo-lab diff ARGS` in the repo (in this process: the repo's code is the running code, so
    the working tree, and a base with the same code, render here)."""
    return run_cli("diff", *args, cwd=repo)


def test_diff_without_changes_exits_0(project_repo):
    proc = _diff(project_repo)
    assert proc.returncode == 0, proc.stderr
    assert "cross-server: 0 added, 0 changed, 0 removed" in proc.stdout
    assert "---" not in proc.stdout


def test_diff_shows_exactly_one_changed_worker_flag(project_repo):
    stack_file = project_repo / "Pulumi.cross-server.yaml"
    text = stack_file.read_text()
    stack_file.write_text(text.replace("      kvCacheBytes: 4Gi\n",
                                       "      kvCacheBytes: 4Gi\n      extraArgs: [--max-num-seqs, '16']\n"))
    proc = _diff(project_repo, "cross-server")
    assert proc.returncode == 1, proc.stderr
    changed = [line for line in proc.stdout.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["+          - --max-num-seqs", "+          - '16'"]
    assert proc.stdout.rstrip().endswith("cross-server: 0 added, 1 changed, 0 removed")


def test_diff_reports_added_stacks_and_bad_refs(project_repo):
    shutil.copy(project_repo / "Pulumi.kv-routing.yaml", project_repo / "Pulumi.kv-copy.yaml")
    proc = _diff(project_repo, "kv-copy")
    assert proc.returncode == 1
    assert "kv-copy: 10 added, 0 changed, 0 removed" in proc.stdout  # incl. 2 pre-pull Jobs, 2 node volumes, 2 claims
    bad = _diff(project_repo, "--base", "no-such-ref")
    assert bad.returncode == 2
    assert "no-such-ref" in bad.stderr


def test_a_base_with_other_code_renders_with_its_own_code(project_repo):
    # The base's program labels namespaces differently; the working tree has the code that runs.
    manifests = project_repo / "infra" / "manifests" / "__init__.py"
    original = manifests.read_text()
    assert 'STACK_LABEL = "dynamo-lab/stack"' in original
    manifests.write_text(original.replace('STACK_LABEL = "dynamo-lab/stack"', 'STACK_LABEL = "dynamo-lab/old-stack"'))
    _git(project_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "old label")
    manifests.write_text(original)
    _git(project_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "new label")
    proc = _diff(project_repo, "--base", "HEAD~1", "cross-server")
    assert proc.returncode == 1, proc.stderr
    changed = [line[0] + line[1:].strip() for line in proc.stdout.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["-dynamo-lab/old-stack: cross-server", "+dynamo-lab/stack: cross-server"] * 2
