"""`dynamo-lab up|down STACK --local` and `pr-preview`: what they refuse before starting anything."""

from __future__ import annotations

import pytest

from infra.lab.cluster import local
from tests.helpers import run_cli


def test_up_without_local_says_to_run_pulumi_itself_and_starts_nothing():
    done = run_cli("up", "cross-server")
    assert done.returncode == 2 and "pulumi up --stack cross-server" in done.stderr and done.stdout == ""
    done = run_cli("down", "kv-routing")
    assert done.returncode == 2 and "pulumi destroy --stack kv-routing" in done.stderr


def test_an_unknown_stack_is_refused_with_the_stacks_there_are():
    done = run_cli("up", "cross-sever", "--local")
    assert done.returncode == 2
    assert "no stack file Pulumi.cross-sever.yaml" in done.stderr
    assert "cross-server, kv-routing, same-server" in done.stderr


def test_the_local_cluster_needs_root_and_says_so(monkeypatch):
    monkeypatch.setattr(local.os, "geteuid", lambda: 1000)
    with pytest.raises(local.LocalError, match="needs root .* run it as root"):
        local.up("cross-server", log=lambda m: None)


def test_pr_preview_refuses_a_ref_that_is_not_a_commit(tmp_path):
    with pytest.raises(local.LocalError, match="git rev-parse"):
        with local.checkout("no-such-ref-anywhere", tmp_path / "t"):
            pass
