"""Every shipped stack deployed by the real Pulumi engine and Kubernetes provider onto the local cluster.

What is real: the Pulumi CLI v3.274.1 and the provider pulumi-resource-kubernetes 4.25.0 (the
release pyproject.toml pins), both built from their Go modules, running the project's own
`infra.program` with the stack's own file, a file backend and a passphrase; the API server,
admission, the controller manager (volume binding, Jobs, namespace deletion) and kwok's simulated
lab nodes. The program runs as an Automation API inline program (dynamo_lab/local_cluster/pulumi_driver.py):
the Python language host is not to be had, and is not needed.

What is not: the Dynamo platform chart and operator (no registry here serves either), so each stack
runs with `platform.manage: false` and the pinned CRDs, and a stand-in writes the graph's Ready
condition through the status subresource, the operator's one part a deploy waits on
(dynamo_lab/local_cluster/standin.py: it starts no pod). Where a test needs `up` to complete, it says so
by running the stand-in.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_lab.local_cluster import pulumi_cli, pulumi_workspace
from dynamo_lab.local_cluster.standin import GraphReady
from infra.plan import plan
from tests.helpers import ROOT, loaded

pytestmark = pytest.mark.cluster

LOCAL = lambda c: c.update(platform={**c.get("platform", {}), "manage": False})  # noqa: E731  (stack_overrides.LOCAL_OVERRIDES)
# What the engine counts besides the plan's resources: the stack itself and its Kubernetes provider.
BESIDES = 2
# A one-key change per stack, and the field of the graph it must change.
CHANGE = {"cross-server": ("decode", 2, 1), "same-server": ("prefill", 2, 1), "kv-routing": ("worker-8gb", 2, 1)}


def type_token(kind: tuple[str, str]) -> str:
    api_version, k = kind
    group, _, version = api_version.rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{k}"


def planned_steps(stack: str, edit=None) -> set[tuple[str, str]]:
    """(type, name) of every resource the plan says the stack registers: its objects and components."""
    planned = plan(loaded(stack, lambda c: (LOCAL(c), edit and edit(c))))
    return {(type_token(o.kind), o.name) for o in planned.objects} | {(c.type, c.name) for c in planned.components}


def resource_steps(result: dict[str, Any]) -> dict[tuple[str, str], str]:
    """The engine's steps by (type, name), less the stack and the provider, which the plan does not hold."""
    return {(s["type"], s["name"]): s["op"] for s in result["steps"]
            if s["type"] != "pulumi:pulumi:Stack" and not s["type"].startswith("pulumi:providers:")}


def object_path(doc: dict[str, Any]) -> str:
    """The API path of a planned object (core and grouped kinds, namespaced or not)."""
    api_version, kind, meta = doc["apiVersion"], doc["kind"], doc["metadata"]
    plural = {"NetworkPolicy": "networkpolicies"}.get(kind, kind.lower() + "s")
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    ns = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    return f"{base}{ns}/{plural}/{meta['name']}"


def graph_key(stack: str) -> str:
    (dgd,) = plan(loaded(stack, LOCAL)).of_kind("DynamoGraphDeployment")
    return f"{dgd.manifest['metadata']['namespace']}/{dgd.manifest['metadata']['name']}"


def on_cluster(api, stack: str) -> dict[str, int]:
    """Each planned object's path -> the API server's answer (200 there, 404 gone)."""
    planned = plan(loaded(stack, LOCAL))
    return {object_path(o.manifest): api.call("GET", object_path(o.manifest))[0] for o in planned.objects}


def changed_file(tmp: Path, stack: str) -> Path:
    """The stack's file with one key changed: a worker group's replicas (CHANGE)."""
    doc = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    group, old, new = CHANGE[stack]
    (g,) = [w for w in doc["config"]["dynamo-lab:workers"] if w["name"] == group]
    assert g["replicas"] == old
    g["replicas"] = new
    out = tmp / f"Pulumi.{stack}.changed.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def copy_checkout(into: Path) -> Path:
    """This checkout's files as they are (committed or not, less what git ignores), copied into `into`."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, names):
        if (ROOT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    return into


def ok(inv: pulumi_cli.Invocation) -> dict[str, Any]:
    assert inv.rc == 0, inv.output[-6000:]
    assert "Traceback" not in inv.output, inv.output[-6000:]
    return inv.result


def test_each_stack_previews_deploys_holds_still_refreshes_changes_and_destroys(lab_cluster_with_crd, engine_bins,
                                                                                  tmp_path, stack):
    api = lab_cluster_with_crd.api()
    ws = pulumi_workspace.Workspace(tmp_path / "ws", stack, lab_cluster_with_crd.kubeconfig)

    # preview: the engine's steps are exactly the plan's objects and components, all creates.
    first = ok(pulumi_cli.invoke("preview", ws, engine_bins))
    steps = resource_steps(first)
    assert set(steps) == planned_steps(stack)
    assert set(steps.values()) == {"create"}

    # up (the stand-in reports the graph Ready): every planned object is on the API server.
    with GraphReady(api) as standin:
        up = ok(pulumi_cli.invoke("up", ws, engine_bins))
    assert standin.marked == [graph_key(stack)], standin.marked
    assert up["summary"].get("create") == len(planned_steps(stack)) + BESIDES
    assert set(on_cluster(api, stack).values()) == {200}, on_cluster(api, stack)

    # A second preview and a refresh change nothing: no perpetual diff, no drift.
    again = ok(pulumi_cli.invoke("preview", ws, engine_bins))
    assert set(resource_steps(again).values()) == {"same"}, resource_steps(again)
    assert set(again["summary"]) == {"same"}, again["summary"]
    refreshed = ok(pulumi_cli.invoke("refresh", ws, engine_bins))
    assert set(refreshed["summary"]) <= {"same"}, refreshed["summary"]

    # One key changed in the stack file: the preview updates exactly the graph, that field.
    changed = ok(pulumi_cli.invoke("preview", ws, engine_bins, stack_file=changed_file(tmp_path, stack), diff=True))
    ops = {k: v for k, v in resource_steps(changed).items() if v != "same"}
    assert ops == {("kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment", "graph-dgd"): "update"}, ops
    group, old, new = CHANGE[stack]
    resources = changed["stdout"].split("\nOutputs:")[0]  # the resources' diff, before the outputs'
    assert re.search(rf"~ replicas\s*: {old} => {new}\n", resources), resources[-4000:]
    ok(pulumi_cli.invoke("preview", ws, engine_bins))  # the workspace holds the shipped file again

    # destroy leaves none of the stack's objects (namespaces gone: no finalizer stuck); again, nothing.
    gone = ok(pulumi_cli.invoke("destroy", ws, engine_bins))
    assert gone["summary"].get("delete") == len(planned_steps(stack)) + BESIDES
    assert set(on_cluster(api, stack).values()) == {404}, on_cluster(api, stack)
    twice = ok(pulumi_cli.invoke("destroy", ws, engine_bins))
    assert set(twice["summary"]) <= {"same"} and not twice["summary"].get("delete"), twice["summary"]


def test_up_waits_for_the_graph_and_fails_after_its_timeout_naming_it(lab_cluster_with_crd, engine_bins, tmp_path):
    """Nothing makes the graph Ready: `up` fails after graph.readyTimeoutSeconds, naming the graph.
    Then the stand-in reports Ready and the same `up` completes."""
    stack = "cross-server"
    api = lab_cluster_with_crd.api()
    doc = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    doc["config"]["dynamo-lab:graph"] = {"readyTimeoutSeconds": 20}
    short = tmp_path / "short.yaml"
    short.write_text(yaml.safe_dump(doc, sort_keys=False))
    ws = pulumi_workspace.Workspace(tmp_path / "ws", stack, lab_cluster_with_crd.kubeconfig)
    failed = pulumi_cli.invoke("up", ws, engine_bins, stack_file=short)
    assert failed.rc == 1, failed.output[-4000:]
    assert "graph-dgd" in failed.output and graph_key(stack) in failed.output, failed.output[-4000:]
    assert "timed out" in failed.output, failed.output[-4000:]
    assert "Traceback" not in failed.output
    with GraphReady(api):
        ok(pulumi_cli.invoke("up", ws, engine_bins, stack_file=short))
    assert ok(pulumi_cli.invoke("preview", ws, engine_bins, stack_file=short))["summary"] == {
        "same": len(planned_steps(stack)) + BESIDES}
    ok(pulumi_cli.invoke("destroy", ws, engine_bins))


def test_a_bad_stack_file_stops_preview_with_its_message_and_no_traceback(lab_cluster_with_crd, engine_bins,
                                                                          tmp_path):
    doc = yaml.safe_load((ROOT / "Pulumi.cross-server.yaml").read_text())
    bad = copy.deepcopy(doc)
    bad["config"]["dynamo-lab:workers"][0]["replicas"] = "two"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad, sort_keys=False))
    ws = pulumi_workspace.Workspace(tmp_path / "ws", "cross-server", lab_cluster_with_crd.kubeconfig)
    inv = pulumi_cli.invoke("preview", ws, engine_bins, stack_file=path)
    assert inv.rc == 1
    assert "workers" in inv.output and "replicas" in inv.output, inv.output[-3000:]
    assert "Traceback" not in inv.output, inv.output[-3000:]
    assert "dynamo-lab-cross-server" not in {n["metadata"]["name"] for n in
                                             lab_cluster_with_crd.api().call("GET", "/api/v1/namespaces")[1]["items"]}
