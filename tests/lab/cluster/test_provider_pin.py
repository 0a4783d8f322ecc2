"""What the pinned provider (pulumi-kubernetes 4.25.0) does where later releases differ, so that a
change of pin shows here: it adopts an object a lost state left behind (4.29 creates client-side
and fails with AlreadyExists instead), and it retries a graph whose CRD is not there yet until the
CRD appears during `up` (the platform chart applies the CRDs in a real deploy). A cluster without
the DynamoGraphDeployment CRD to begin with."""

from __future__ import annotations

import pytest

from dynamo_lab.local_cluster import pulumi_cli, pulumi_workspace
from dynamo_lab.local_cluster.api import apply_crds
from dynamo_lab.local_cluster.standin import GraphReady
from infra.plan import plan
from tests.helpers import loaded, wait_for
from tests.lab.cluster.test_deploy import LOCAL, object_path, ok, on_cluster

pytestmark = pytest.mark.cluster

STACK = "kv-routing"


def test_a_graph_created_before_its_crd_exists_waits_and_succeeds_once_the_crd_is_applied(
        lab_cluster, engine_bins, dgd_crd_dir, tmp_path):
    api = lab_cluster.api()
    assert api.call("GET", "/apis/nvidia.com/v1beta1/dynamographdeployments")[0] == 404
    ws = pulumi_workspace.Workspace(tmp_path / "ws", STACK, lab_cluster.kubeconfig)
    preview = ok(pulumi_cli.invoke("preview", ws, engine_bins))
    assert {s["op"] for s in preview["steps"] if s["type"].endswith(":DynamoGraphDeployment")} == {"create"}
    with GraphReady(api):
        proc, result = pulumi_cli.start("up", ws, engine_bins)
        (ns,) = plan(loaded(STACK, LOCAL)).of_kind("Namespace")
        wait_for(lambda: api.call("GET", object_path(ns.manifest))[0] == 200, 180)
        assert proc.poll() is None
        apply_crds(api, dgd_crd_dir)  # what the platform chart's operator does in a real deploy
        up = pulumi_cli.finish(proc, result, timeout=600)
    ok(up)
    assert set(on_cluster(api, STACK).values()) == {200}
    ok(pulumi_cli.invoke("destroy", ws, engine_bins))


def test_an_object_left_by_a_lost_state_is_adopted_not_refused(lab_cluster, engine_bins, dgd_crd_dir, tmp_path):
    api = lab_cluster.api()
    apply_crds(api, dgd_crd_dir)
    planned = plan(loaded(STACK, LOCAL))
    (ns,) = planned.of_kind("Namespace")
    assert api.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": ns.manifest["metadata"]["name"]}})[0] == 201
    ws = pulumi_workspace.Workspace(tmp_path / "ws", STACK, lab_cluster.kubeconfig)
    with GraphReady(api):
        up = ok(pulumi_cli.invoke("up", ws, engine_bins))
    assert up["summary"].get("create") == len([s for s in up["steps"] if s["op"] == "create"])
    code, body = api.call("GET", object_path(ns.manifest))
    assert code == 200 and body["metadata"]["labels"] == {**body["metadata"]["labels"],
                                                          **ns.manifest["metadata"]["labels"]}
    ok(pulumi_cli.invoke("destroy", ws, engine_bins))
    wait_for(lambda: api.call("GET", object_path(ns.manifest))[0] == 404, 120)  # adopted, so destroyed
