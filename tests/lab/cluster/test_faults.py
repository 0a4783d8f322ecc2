"""Faults during a real `pulumi up` (the engine and cluster of test_deploy.py): interrupted with
SIGINT, killed with SIGKILL, the API server gone; then a re-run converges to the same
state, with nothing orphaned or duplicated. And what the state keeps of a secret."""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess

import pytest

from dynamo_lab.local_cluster import harness, pulumi_cli, pulumi_workspace
from dynamo_lab.local_cluster.standin import GraphReady
from dynamo_lab.paths import ROOT
from infra.plan import HF_TOKEN_KEY, plan
from tests.helpers import loaded, wait_for
from tests.lab.cluster.test_deploy import BESIDES, LOCAL, ok, on_cluster, planned_steps

pytestmark = pytest.mark.cluster

STACK = "cross-server"
# Collections listed to count what is in the graph namespace: a duplicate would show as a second name.
LISTED = {"Job": "/apis/batch/v1/namespaces/{ns}/jobs",
          "PersistentVolumeClaim": "/api/v1/namespaces/{ns}/persistentvolumeclaims",
          "DynamoGraphDeployment": "/apis/nvidia.com/v1beta1/namespaces/{ns}/dynamographdeployments"}


def graph_namespace() -> str:
    (dgd,) = plan(loaded(STACK, LOCAL)).of_kind("DynamoGraphDeployment")
    return dgd.manifest["metadata"]["namespace"]


def in_namespace(api) -> dict[str, set[str]]:
    ns = graph_namespace()
    return {kind: {i["metadata"]["name"] for i in api.call("GET", path.format(ns=ns))[1]["items"]}
            for kind, path in LISTED.items()}


def planned_names() -> dict[str, set[str]]:
    planned = plan(loaded(STACK, LOCAL))
    return {kind: {o.manifest["metadata"]["name"] for o in planned.of_kind(kind)} for kind in LISTED}


def converged(ws, bins, api) -> None:
    """A re-run `up` completes; then nothing is left to change, every planned object is there
    once, and no engine process of the workspace is left."""
    with GraphReady(api):
        ok(pulumi_cli.invoke("up", ws, bins))
    again = ok(pulumi_cli.invoke("preview", ws, bins))
    assert again["summary"] == {"same": len(planned_steps(STACK)) + BESIDES}, again["summary"]
    assert set(on_cluster(api, STACK).values()) == {200}
    assert in_namespace(api) == planned_names()
    assert pulumi_cli.processes(ws) == {}


def started_then(ws, bins, api, signum) -> pulumi_cli.Invocation:
    """`up` started with nothing to make the graph Ready; the signal once its first objects exist."""
    proc, result = pulumi_cli.start("up", ws, bins)
    ns = graph_namespace()
    try:
        wait_for(lambda: api.call("GET", f"/api/v1/namespaces/{ns}")[0] == 200 or proc.poll() is not None, 180)
        assert proc.poll() is None, "up ended before it could be interrupted"
        os.killpg(proc.pid, signum)
        return pulumi_cli.finish(proc, result, timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_up_interrupted_with_sigint_stops_cleanly_and_a_rerun_converges(lab_cluster_with_crd, engine_bins, tmp_path):
    api = lab_cluster_with_crd.api()
    ws = pulumi_workspace.Workspace(tmp_path / "ws", STACK, lab_cluster_with_crd.kubeconfig)
    inv = started_then(ws, engine_bins, api, signal.SIGINT)
    assert inv.rc != 0, inv.output[-3000:]
    assert "Traceback" not in inv.output, inv.output[-3000:]
    wait_for(lambda: pulumi_cli.processes(ws) == {}, 60)
    assert pulumi_cli.locks(ws) == []  # Pulumi's own cancel released the lock: the re-run needs no `pulumi cancel`
    converged(ws, engine_bins, api)
    ok(pulumi_cli.invoke("destroy", ws, engine_bins))


def test_up_killed_with_sigkill_leaves_a_lock_that_cancel_clears_then_a_rerun_converges(lab_cluster_with_crd,
                                                                                         engine_bins, tmp_path):
    api = lab_cluster_with_crd.api()
    ws = pulumi_workspace.Workspace(tmp_path / "ws", STACK, lab_cluster_with_crd.kubeconfig)
    inv = started_then(ws, engine_bins, api, signal.SIGKILL)
    assert inv.rc == -signal.SIGKILL
    # The CLI starts its plugins in process groups of their own: the provider outlives it, orphaned.
    left = wait_for(lambda: pulumi_workspace.orphans(ws), 30)
    assert pulumi_cli.locks(ws), "a killed CLI leaves its lock, where pulumi_cli.locks looks for it"
    rerun = pulumi_cli.invoke("up", ws, engine_bins)
    for pid in left:  # the next run stops them, and says so
        assert f"stopped a plugin a killed run left behind (pid {pid})" in rerun.output, rerun.output[-3000:]
    # The killed CLI held the stack's lock: the re-run is refused, Pulumi says why, and `cancel` clears it.
    assert rerun.rc != 0, "the re-run went ahead on a stack the killed CLI had locked"
    assert "locked" in rerun.output and "Traceback" not in rerun.output, rerun.output[-3000:]
    assert pulumi_cli.locks(ws)
    ok(pulumi_cli.invoke("cancel", ws, engine_bins))
    assert pulumi_cli.locks(ws) == []
    # Where the kill lands is chance; one place it can land is between the file backend's truncating
    # the checkpoint's attribute file and writing it (pulumi_workspace.torn_attributes). Put the stack
    # there on purpose: the next run repairs it, says so, and goes ahead.
    attrs = ws.state / ".pulumi" / "stacks" / pulumi_workspace.PROJECT / f"{STACK}.json.attrs"
    assert attrs.is_file(), sorted(str(p) for p in ws.state.rglob("*"))
    attrs.write_bytes(b"")
    torn = pulumi_cli.invoke("preview", ws, engine_bins)
    assert torn.rc == 0 and f"removed .pulumi/stacks/{pulumi_workspace.PROJECT}/{STACK}.json.attrs" in torn.output, \
        torn.output[-3000:]
    converged(ws, engine_bins, api)
    ok(pulumi_cli.invoke("destroy", ws, engine_bins))


# The longest the fault test's API server outage may last: it ends once `up` has ended (seconds
# here), so this bounds it only should the test stop before it ends it.
OUTAGE_S = 300


def test_up_with_the_api_server_gone_fails_naming_the_lost_connection_and_a_rerun_converges(
        lab_cluster_with_crd, engine_bins, tmp_path):
    """The API server stopped (the control plane's outage) before `up` starts, and down until `up`
    has ended, then started again (the stand-in running throughout, so only the outage can fail
    it): `up` fails, naming the lost connection, without a traceback and without hanging; once the
    API server is back, a re-run converges."""
    api = lab_cluster_with_crd.api()
    ws = pulumi_workspace.Workspace(tmp_path / "ws", STACK, lab_cluster_with_crd.kubeconfig)
    cluster = lab_cluster_with_crd.state_dir.path
    lab_cluster_with_crd.stop_apiserver(OUTAGE_S)
    wait_for(lambda: harness.status_of(cluster).apiserver == "stopped", 60)
    with GraphReady(api):
        inv = pulumi_cli.invoke("up", ws, engine_bins, timeout=900)
        during = harness.status_of(cluster).apiserver == "stopped"
        lab_cluster_with_crd.end_outage()
        wait_for(lab_cluster_with_crd.apiserver_back, 180)
    assert during, f"up ended after the outage's {OUTAGE_S} s bound: raise OUTAGE_S\n{inv.output[-3000:]}"
    assert inv.rc != 0, inv.output[-3000:]
    assert "Traceback" not in inv.output, inv.output[-3000:]
    assert re.search(r"connection refused|connect: |EOF|unreachable|i/o timeout", inv.output), inv.output[-3000:]
    converged(ws, engine_bins, api)
    ok(pulumi_cli.invoke("destroy", ws, engine_bins))


def test_a_secret_set_with_the_cli_never_reaches_the_state_or_the_output_in_plain_text(lab_cluster_with_crd,
                                                                                        engine_bins, tmp_path):
    api = lab_cluster_with_crd.api()
    ws = pulumi_workspace.Workspace(tmp_path / "ws", STACK, lab_cluster_with_crd.kubeconfig)
    token = "hf_dynamolabtest" + "x" * 20
    pulumi_workspace.prepare(ws, ROOT / f"Pulumi.{STACK}.yaml")
    env = pulumi_workspace.cli_env(ws, pulumi_workspace.passphrase(ws), os.environ)
    pulumi = str(engine_bins["pulumi"] / "pulumi")
    subprocess.run([pulumi, "stack", "init", STACK], cwd=ws.project, env=env, check=True, capture_output=True)
    subprocess.run([pulumi, "config", "set", "--secret", "--stack", STACK, "dynamo-lab:hfToken", token],
                   cwd=ws.project, env=env, check=True, capture_output=True)
    assert token not in ws.stack_file.read_text()
    with GraphReady(api):
        up = ok(pulumi_cli.invoke("up", ws, engine_bins))
    assert token not in up["stdout"] and token not in str(up["outputs"])
    files = [path for path in ws.state.rglob("*") if path.is_file()]
    (checkpoint,) = [path for path in files if path.name == f"{STACK}.json" and "stacks" in path.parts]
    assert b'"ciphertext"' in checkpoint.read_bytes()  # the secret is in the state, encrypted
    for path in files:
        assert token.encode() not in path.read_bytes(), f"{path} holds the token in plain text"
    ns = graph_namespace()
    held = [s for s in api.call("GET", f"/api/v1/namespaces/{ns}/secrets")[1]["items"]
            if HF_TOKEN_KEY in s.get("data", {})]
    assert [base64.b64decode(s["data"][HF_TOKEN_KEY]).decode() for s in held] == [token]  # where it is used
    ok(pulumi_cli.invoke("destroy", ws, engine_bins))
