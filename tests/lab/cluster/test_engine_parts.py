"""The engine driver's and the operator stand-in's pure parts: what a local deployment writes and
hands the Pulumi CLI, and what the stand-in writes into a graph's status (no cluster, no CLI)."""

from __future__ import annotations

import stat

import yaml

from infra.lab.cluster import engine, standin, tools
from tests.helpers import ROOT


def test_the_local_overrides_turn_only_platform_management_off_and_keep_the_stacks_other_keys():
    source = yaml.safe_load((ROOT / "Pulumi.cross-server.yaml").read_text())
    doc = engine.stack_document(source, None, engine.LOCAL_OVERRIDES)
    assert doc["config"]["dynamo-lab:platform"] == {"manage": False}
    assert {k: v for k, v in doc["config"].items() if k != "dynamo-lab:platform"} == source["config"]
    with_platform = {"config": {"dynamo-lab:platform": {"namespace": "ops", "manage": True}}}
    assert engine.stack_document(with_platform, None, engine.LOCAL_OVERRIDES)["config"]["dynamo-lab:platform"] == \
        {"namespace": "ops", "manage": False}


def test_rewriting_the_stack_file_keeps_what_the_cli_wrote_there():
    """The passphrase's salt and a secret set with `pulumi config set --secret` survive a new
    source file; a plain value the source dropped does not come back."""
    existing = {"encryptionsalt": "v1:abc", "config": {"dynamo-lab:hfToken": {"secure": "v1:xyz"},
                                                       "dynamo-lab:graph": {"readyTimeoutSeconds": 5}}}
    doc = engine.stack_document({"config": {"kubernetes:context": "dynamo-lab"}}, existing, {})
    assert doc == {"encryptionsalt": "v1:abc", "config": {"kubernetes:context": "dynamo-lab",
                                                          "dynamo-lab:hfToken": {"secure": "v1:xyz"}}}


def test_the_cli_sees_only_this_workspace_and_no_ambient_pulumi_or_cluster(tmp_path):
    ws = engine.Workspace(tmp_path, "cross-server", tmp_path / "kubeconfig")
    env = engine.cli_env(ws, "pass", {"PATH": "/bin", "PULUMI_ACCESS_TOKEN": "pul-x", "KUBECONFIG": "/prod",
                                      "PULUMI_K8S_DELETE_UNREACHABLE": "true", "PULUMI_BACKEND_URL": "s3://prod"})
    assert env["PULUMI_BACKEND_URL"] == f"file://{tmp_path / 'state'}"
    assert env["KUBECONFIG"] == str(tmp_path / "kubeconfig")
    assert "PULUMI_ACCESS_TOKEN" not in env and "PULUMI_K8S_DELETE_UNREACHABLE" not in env
    assert env["PULUMI_IGNORE_AMBIENT_PLUGINS"] == env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    assert env["PATH"] == "/bin"


def test_the_passphrase_is_made_once_and_readable_by_its_owner_only(tmp_path):
    ws = engine.Workspace(tmp_path / "ws", "cross-server", tmp_path / "kubeconfig")
    engine.prepare(ws, ROOT / "Pulumi.cross-server.yaml")
    first = engine.passphrase(ws)
    engine.prepare(ws, ROOT / "Pulumi.cross-server.yaml")
    assert engine.passphrase(ws) == first and len(first) >= 24
    assert stat.S_IMODE(ws.passphrase_file.stat().st_mode) == 0o600
    assert yaml.safe_load((ws.project / "Pulumi.yaml").read_text())["name"] == "dynamo-lab"


def test_the_driver_asks_for_the_provider_release_that_is_built():
    assert engine.PROVIDER_VERSION == tools.PROVIDER.lstrip("v")


def test_the_driver_command_runs_the_program_of_the_root_it_is_given(tmp_path):
    ws = engine.Workspace(tmp_path, "kv-routing", tmp_path / "k")
    argv = engine.command("preview", ws, {"pulumi": tmp_path / "p", "pulumi-resource-kubernetes": tmp_path / "r"},
                          program_root=tmp_path / "other", diff=True)
    assert argv[1] == str(engine.ENGINE_FILE)  # a script: the program's `infra` is the only one imported
    assert argv[argv.index("--program-root") + 1] == str(tmp_path / "other") and "--diff" in argv


def test_the_stand_in_writes_ready_at_the_graphs_generation_and_says_what_it_is():
    status = standin.ready_status(3, now="2026-12-01T00:00:00Z")["status"]
    (ready,) = status["conditions"]
    assert (ready["type"], ready["status"], status["observedGeneration"]) == ("Ready", "True", 3)
    assert "stand-in" in ready["message"] and "no worker" in ready["message"]
    graph = {"metadata": {"generation": 3}, "status": status}
    assert standin.is_ready(graph)
    assert not standin.is_ready({"metadata": {"generation": 4}, "status": status})  # a newer spec: not yet
    assert not standin.is_ready({"metadata": {"generation": 1}})
