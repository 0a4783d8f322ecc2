"""The Pulumi driver's and the operator stand-in's pure parts: what a local deployment writes and
hands the Pulumi CLI, and what the stand-in writes into a graph's status (no cluster, no CLI)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml

from dynamo_lab.local_cluster import (
    pulumi_cli,
    pulumi_driver,
    pulumi_workspace,
    stack_overrides,
    standin,
    state,
    tools,
)
from tests.helpers import ROOT


def test_the_local_overrides_turn_only_platform_management_off_and_keep_the_stacks_other_keys():
    source = yaml.safe_load((ROOT / "Pulumi.cross-server.yaml").read_text())
    doc = stack_overrides.stack_document(source, None, stack_overrides.LOCAL_OVERRIDES)
    assert doc["config"]["dynamo-lab:platform"] == {"manage": False}
    assert {k: v for k, v in doc["config"].items() if k != "dynamo-lab:platform"} == source["config"]
    with_platform = {"config": {"dynamo-lab:platform": {"namespace": "ops", "manage": True}}}
    platform = stack_overrides.stack_document(with_platform, None, stack_overrides.LOCAL_OVERRIDES)["config"]
    assert platform["dynamo-lab:platform"] == {"namespace": "ops", "manage": False}


def test_rewriting_the_stack_file_keeps_what_the_cli_wrote_there():
    """The passphrase's salt and a secret set with `pulumi config set --secret` survive a new
    source file; a plain value the source dropped does not come back."""
    existing = {"encryptionsalt": "v1:abc", "config": {"dynamo-lab:hfToken": {"secure": "v1:xyz"},
                                                       "dynamo-lab:graph": {"readyTimeoutSeconds": 5}}}
    doc = stack_overrides.stack_document({"config": {"kubernetes:context": "dynamo-lab"}}, existing, {})
    assert doc == {"encryptionsalt": "v1:abc", "config": {"kubernetes:context": "dynamo-lab",
                                                          "dynamo-lab:hfToken": {"secure": "v1:xyz"}}}


def test_the_cli_sees_only_this_workspace_and_no_ambient_pulumi_or_cluster(tmp_path):
    ws = pulumi_workspace.Workspace(tmp_path, "cross-server", tmp_path / "kubeconfig")
    env = pulumi_workspace.cli_env(ws, "pass", {"PATH": "/bin", "PULUMI_ACCESS_TOKEN": "pul-x", "KUBECONFIG": "/prod",
                                      "PULUMI_K8S_DELETE_UNREACHABLE": "true", "PULUMI_BACKEND_URL": "s3://prod"})
    assert env["PULUMI_BACKEND_URL"] == f"file://{tmp_path / 'state'}"
    assert env["KUBECONFIG"] == str(tmp_path / "kubeconfig")
    assert "PULUMI_ACCESS_TOKEN" not in env and "PULUMI_K8S_DELETE_UNREACHABLE" not in env
    assert env["PULUMI_IGNORE_AMBIENT_PLUGINS"] == env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    assert env["PATH"] == "/bin"


def local_kubeconfig(tmp_path) -> Path:
    """A kubeconfig as the cluster harness writes it (its one context, `dynamo-lab`)."""
    path = tmp_path / "local-kubeconfig"
    path.write_text(json.dumps(state.kubeconfig("https://127.0.0.1:6443", tmp_path / "ca.crt", "t0ken")))
    return path


def test_the_passphrase_is_made_once_and_readable_by_its_owner_only(tmp_path):
    ws = pulumi_workspace.Workspace(tmp_path / "ws", "cross-server", local_kubeconfig(tmp_path))
    pulumi_workspace.prepare(ws, ROOT / "Pulumi.cross-server.yaml")
    first = pulumi_workspace.passphrase(ws)
    pulumi_workspace.prepare(ws, ROOT / "Pulumi.cross-server.yaml")
    assert pulumi_workspace.passphrase(ws) == first and len(first) >= 24
    assert stat.S_IMODE(ws.passphrase_file.stat().st_mode) == 0o600
    assert yaml.safe_load((ws.project / "Pulumi.yaml").read_text())["name"] == "dynamo-lab"


def test_the_driver_asks_for_the_provider_release_that_is_built():
    assert pulumi_workspace.PROVIDER_VERSION == tools.PROVIDER.lstrip("v")


def test_the_driver_command_runs_the_program_of_the_root_it_is_given(tmp_path):
    ws = pulumi_workspace.Workspace(tmp_path, "kv-routing", tmp_path / "k")
    argv = pulumi_cli.command("preview", ws, {"pulumi": tmp_path / "p", "pulumi-resource-kubernetes": tmp_path / "r"},
                          program_root=tmp_path / "other", diff=True)
    assert argv[1] == str(pulumi_cli.DRIVER_FILE)  # a script: the program's `infra` is the only one imported
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


# ---- what a local run takes from a stack file written for the lab ----

# A stack file as the README's checklist leaves it for the lab: its own kubeconfig and context,
# initialised there (`pulumi stack init` wrote the salt; the token set with --secret).
LAB_FILE = {
    "encryptionsalt": "v1:kVmHfVd7Fq8=:v1:Xnq0YzO6nG0Sx0xh:hkK6u6MRt0l1mbFvyCjuVB0LlZ2n0A==",
    "config": {
        "kubernetes:context": "lab-admin@lab",
        "kubernetes:kubeconfig": "~/.kube/lab.yaml",
        "kubernetes:cluster": "lab",
        "kubernetes:renderYamlToDirectory": "/etc",
        "dynamo-lab:hfToken": {"secure": "v1:4EY/1tsqnGXgHy0s:Qe3O2qOq0b6y0AzdS4Xn+bq0Sg2ZkvWBPTm0J3Z1Hw=="},
        "dynamo-lab:platform": {"namespace": "dynamo-system", "manage": True},
        "dynamo-lab:graph": {"name": "lab-graph"},
    },
}


def test_a_local_run_sets_every_key_that_can_choose_a_cluster_to_the_local_one(tmp_path):
    kubeconfig = local_kubeconfig(tmp_path)
    overrides = stack_overrides.local_overrides(kubeconfig, stack_overrides.kubeconfig_context(kubeconfig))
    doc = stack_overrides.stack_document(LAB_FILE, None, overrides)
    config = doc["config"]
    assert config["kubernetes:kubeconfig"] == str(kubeconfig)
    assert config["kubernetes:context"] == "dynamo-lab"  # the harness's own, read from its kubeconfig
    assert "kubernetes:cluster" not in config and "kubernetes:renderYamlToDirectory" not in config
    assert [k for k in config if k.startswith("kubernetes:")] == ["kubernetes:context", "kubernetes:kubeconfig"]
    assert config["dynamo-lab:graph"] == {"name": "lab-graph"}
    assert config["dynamo-lab:platform"] == {"namespace": "dynamo-system", "manage": False}
    # A workspace written before (say by an earlier version, with the lab's kubeconfig) wins nothing back.
    old = {"encryptionsalt": "v1:own", "config": {"kubernetes:kubeconfig": {"secure": "v1:lab"},
                                                   "kubernetes:cluster": {"secure": "v1:lab"}}}
    again = stack_overrides.stack_document(LAB_FILE, old, overrides)["config"]
    assert again["kubernetes:kubeconfig"] == str(kubeconfig) and "kubernetes:cluster" not in again


def test_a_stack_file_initialised_for_the_lab_leaves_out_what_another_passphrase_encrypted(tmp_path):
    """Its salt and `secure:` values are the lab passphrase's: copied, Pulumi refuses the workspace's."""
    overrides = stack_overrides.local_overrides(tmp_path / "k", "dynamo-lab")
    source = {**LAB_FILE, "secretsprovider": "awskms://alias/lab", "encryptedkey": "AQICAHh...",
              "config": {**LAB_FILE["config"], "dynamo-lab:benchmark": {"headers": [{"secure": "v1:x"}]}}}
    doc = stack_overrides.stack_document(source, None, overrides)
    assert set(doc) == {"config"}
    assert "dynamo-lab:hfToken" not in doc["config"] and "dynamo-lab:benchmark" not in doc["config"]
    assert not stack_overrides.is_secure(doc["config"])
    assert "secure" not in yaml.safe_dump(doc)
    changed, left_out = stack_overrides.local_changes(source, doc)
    assert changed == ["kubernetes:context", "kubernetes:kubeconfig", "dynamo-lab:platform"]
    assert left_out == ["kubernetes:cluster", "kubernetes:renderYamlToDirectory", "dynamo-lab:hfToken",
                        "dynamo-lab:benchmark", "encryptionsalt", "secretsprovider", "encryptedkey"]
    # The workspace's own salt and a secret set there with its passphrase are kept.
    existing = {"encryptionsalt": "v1:own", "config": {"dynamo-lab:hfToken": {"secure": "v1:own"}}}
    doc = stack_overrides.stack_document(source, existing, overrides)
    assert doc["encryptionsalt"] == "v1:own" and doc["config"]["dynamo-lab:hfToken"] == {"secure": "v1:own"}
    assert "encryptionsalt" in stack_overrides.local_changes(source, doc)[1]  # not the source's salt


def test_prepare_writes_the_overrides_into_the_workspace_file(tmp_path):
    source = tmp_path / "Pulumi.cross-server.yaml"
    source.write_text(yaml.safe_dump(LAB_FILE))
    ws = pulumi_workspace.Workspace(tmp_path / "ws", "cross-server", local_kubeconfig(tmp_path))
    pulumi_workspace.prepare(ws, source)
    written = yaml.safe_load(ws.stack_file.read_text())
    assert written["config"]["kubernetes:kubeconfig"] == str(ws.kubeconfig)
    assert written["config"]["kubernetes:context"] == "dynamo-lab"
    assert "encryptionsalt" not in written and "dynamo-lab:hfToken" not in written["config"]


def test_a_kubeconfig_without_a_context_stops_the_driver_with_its_name(tmp_path):
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(RuntimeError, match="names no current-context"):
        stack_overrides.kubeconfig_context(bad)
    with pytest.raises(RuntimeError, match="cannot be read"):
        stack_overrides.kubeconfig_context(tmp_path / "missing")


@pytest.mark.parametrize("name", ["..", ".", "a/b", "ab\n", "/etc", "a b", "x" * 101, "a\nb", ""])
def test_the_driver_refuses_a_stack_name_pulumi_would_not_take(tmp_path, name, capsys):
    code = pulumi_driver.main([ "preview", "--stack", name, "--workspace", str(tmp_path / "ws"),
                        "--kubeconfig", str(tmp_path / "k")])
    assert code == 2 and "is not a stack name" in capsys.readouterr().err
    assert not (tmp_path / "ws").exists()


def test_a_torn_attribute_file_a_killed_run_left_is_removed_and_said_and_nothing_else_is(tmp_path):
    ws = pulumi_workspace.Workspace(tmp_path / "ws", "cross-server", tmp_path / "kubeconfig")
    stacks = ws.state / ".pulumi" / "stacks" / "dynamo-lab"
    stacks.mkdir(parents=True)
    checkpoint = stacks / "cross-server.json"
    checkpoint.write_text('{"version": 3}')
    (stacks / "cross-server.json.attrs").write_bytes(b"")               # killed after os.Create
    (stacks / "cross-server.json.bak.attrs").write_bytes(b'{"user.cont')  # killed mid-write
    kept = stacks / "other.json.attrs"
    kept.write_text('{"user.content_type": "application/octet-stream"}\n')
    outside = tmp_path / "outside.attrs"
    outside.write_bytes(b"")
    (stacks / "linked.json.attrs").symlink_to(outside)
    said = []
    removed = pulumi_workspace.repair_torn_attributes(ws, said.append)
    assert sorted(p.name for p in removed) == ["cross-server.json.attrs", "cross-server.json.bak.attrs"]
    assert not (stacks / "cross-server.json.attrs").exists() and not (stacks / "cross-server.json.bak.attrs").exists()
    assert checkpoint.read_text() == '{"version": 3}' and kept.exists() and outside.exists()
    assert (stacks / "linked.json.attrs").is_symlink()
    assert said == [f"engine: removed .pulumi/stacks/dynamo-lab/{name}, which a killed run left empty or torn "
                    "(the file backend's object beside it is intact)"
                    for name in ("cross-server.json.attrs", "cross-server.json.bak.attrs")]
    assert pulumi_workspace.repair_torn_attributes(ws, said.append) == []
