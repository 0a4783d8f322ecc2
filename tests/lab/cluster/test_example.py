"""The example beyond the lab, `two-node-rdma`, deployed by the real Pulumi engine and Kubernetes
provider onto a cluster of its own shape: kwok's simulation of two 8-GPU nodes with an RDMA device
plugin's resource beside a CPU node (tests/data/preflight/two-8gpu-rdma.json), the pinned CRD.

What is real, and what is not, as in test_deploy.py: the CLI, the provider, the API server, Pod
Security admission, the scheduler and the controller manager are; the Dynamo operator is not (a
stand-in reports the graph Ready, and the graph's pods are made here from its pod templates, as the
operator would make them, to show where the scheduler puts them). No GPU, RDMA device or NIC exists:
kwok's nodes advertise the resources, nothing uses them.
"""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from dynamo_lab.local_cluster import pulumi_cli, pulumi_workspace
from dynamo_lab.local_cluster.api import STRICT
from dynamo_lab.local_cluster.standin import GraphReady
from infra.manifests.security import ENFORCE_LABEL
from infra.plan import plan
from tests.helpers import loaded, wait_for
from tests.lab.cluster.test_deploy import BESIDES, LOCAL, graph_key, ok, on_cluster, planned_steps, resource_steps
from tests.lab.cluster.test_stacks import PODS, PSA_WARNING, _pods

pytestmark = pytest.mark.cluster

STACK = "two-node-rdma"
GPU_NODES = {"gpu-a", "gpu-b"}


def _scheduled(api, ns: str, names: list[str]) -> dict[str, dict]:
    """The named pods once the scheduler has placed each one or called it unschedulable."""
    def decided():
        items = {p["metadata"]["name"]: p for p in api.call("GET", PODS.format(ns=ns))[1]["items"]
                 if p["metadata"]["name"] in names}
        done = [p for p in items.values() if p["spec"].get("nodeName") or any(
            c.get("reason") == "Unschedulable" for c in p["status"].get("conditions", []))]
        return items if len(done) == len(names) else None
    return wait_for(decided, 90)


def test_the_example_deploys_its_pre_pull_runs_on_both_nodes_and_its_workers_spread(rdma_cluster_with_crd,
                                                                                    engine_bins, tmp_path):
    api = rdma_cluster_with_crd.api()
    ws = pulumi_workspace.Workspace(tmp_path / "ws", STACK, rdma_cluster_with_crd.kubeconfig)

    first = ok(pulumi_cli.invoke("preview", ws, engine_bins))
    assert set(resource_steps(first)) == planned_steps(STACK)

    # up completes: the pre-pull Job's two pods ran, one on each 8-GPU node (its anti-affinity), the
    # node caches' claims bound, and the graph waited for them; the stand-in reports it Ready.
    with GraphReady(api) as standin:
        up = ok(pulumi_cli.invoke("up", ws, engine_bins))
    assert standin.marked == [graph_key(STACK)], standin.marked
    assert up["summary"].get("create") == len(planned_steps(STACK)) + BESIDES
    assert set(on_cluster(api, STACK).values()) == {200}, on_cluster(api, STACK)
    planned = plan(loaded(STACK, LOCAL))
    ns = planned.stack.config.graph.namespace
    (job,) = planned.of_kind("Job")
    job_name = job.manifest["metadata"]["name"]
    pulled = [p for p in api.call("GET", PODS.format(ns=ns))[1]["items"]
              if p["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") == job_name]
    assert {p["spec"]["nodeName"] for p in pulled} == GPU_NODES, [p["spec"].get("nodeName") for p in pulled]

    # The namespace enforces what its pods need, as the API server stored it: baseline, for the
    # node cache's root step; the RDMA workers ask for nothing more (issue 43: it was privileged,
    # for an IPC_LOCK the workers' uid 1000 could not hold; docs/security.md, "RDMA workers").
    labels = api.call("GET", f"/api/v1/namespaces/{ns}")[1]["metadata"]["labels"]
    assert labels[ENFORCE_LABEL] == "baseline", labels
    assert labels["pod-security.kubernetes.io/warn"] == "restricted", labels

    # Pod Security admits the graph's pods, and the scheduler gives each node one prefill and one
    # decode worker (spread even), each with 2 GPUs and an RDMA device. The namespace warns at
    # restricted, so a worker short of it would draw Pod Security's warning: none does.
    made = []
    for name, pod, replicas in _pods(planned):
        if name not in ("prefill", "decode"):
            continue
        for i in range(replicas):
            p = copy.deepcopy(pod)
            p["metadata"]["name"] += f"-{i}"
            assert api.create(PODS.format(ns=ns), p) == 201
            assert not [w for w in api.last_warnings if PSA_WARNING in w], api.last_warnings
            made.append(p["metadata"]["name"])
    for name in made:
        stored = api.call("GET", f"{PODS.format(ns=ns)}/{name}")[1]["spec"]
        pod_sc = stored["securityContext"]
        for c in stored["containers"]:
            sc = c["securityContext"]
            assert sc["capabilities"] == {"drop": ["ALL"]}, (name, sc)  # none added
            assert sc["allowPrivilegeEscalation"] is False, (name, sc)
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, (name, sc, pod_sc)
            assert sc.get("runAsUser", pod_sc.get("runAsUser")) == 1000, (name, sc, pod_sc)
            assert c["resources"]["limits"]["rdma/rdma_shared_device_a"] == "1", (name, c["resources"])

    # And the level is enforced, not only labelled: a worker that added IPC_LOCK, as before
    # issue 43, is refused here (baseline allows no capability beyond its default set).
    _, worker, _ = next(x for x in _pods(planned) if x[0] == "prefill")
    worker["metadata"]["name"] += "-ipc-lock"
    worker["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = ["IPC_LOCK"]
    code, body = api.call("POST", f"{PODS.format(ns=ns)}?dryRun=All&{STRICT}", worker)
    assert code == 403 and "violates PodSecurity" in body["message"] and "IPC_LOCK" in body["message"], body

    placed = _scheduled(api, ns, made)
    where = Counter((p["metadata"]["labels"]["dynamo-lab-test/component"], p["spec"].get("nodeName"))
                    for p in placed.values())
    assert where == Counter({(g, n): 1 for g in ("prefill", "decode") for n in GPU_NODES}), where

    # The operator deletes a graph's pods with the graph; here that is the test's part, before destroy
    # (a pod still mounting the cache's claim would hold it by its pvc-protection finalizer).
    for name in made:
        api.call("DELETE", f"{PODS.format(ns=ns)}/{name}?gracePeriodSeconds=0")
    wait_for(lambda: not [p for p in api.call("GET", PODS.format(ns=ns))[1]["items"]
                          if p["metadata"]["name"] in made] or None)
    gone = ok(pulumi_cli.invoke("destroy", ws, engine_bins))
    assert gone["summary"].get("delete") == len(planned_steps(STACK)) + BESIDES
