"""`dynamo-lab preflight STACK --from FILE` against saved kubectl output of the lab (a 24GB node and
an 8GB node, both time-sliced to 4 nvidia.com/gpu) and variants of it that must not fit: each
asserts the exit code, the verdict and the fix a user would follow."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from dynamo_lab.cli import main
from dynamo_lab.preflight import cluster_data
from dynamo_lab.preflight.checks import check
from infra.config.models import ClusterTarget
from tests.helpers import ROOT, everything_on, loaded

DATA = ROOT / "tests" / "data" / "preflight"
LAB = DATA / "lab.json"


def lab() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The lab's saved data: `kubectl version -o json` and the List of `kubectl get ... -o json`."""
    version, listing = cluster_data.documents(LAB.read_text(), str(LAB))
    return version, listing["items"]


def node(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(i for i in items if i["kind"] == "Node" and i["metadata"]["name"] == name)


def saved(tmp_path: Path, edit: Optional[Callable[[dict, list], None]] = None) -> str:
    """The lab's data, edited, written in the documented format (two JSON documents, one file)."""
    version, items = copy.deepcopy(lab())
    if edit:
        edit(version, items)
    path = tmp_path / "cluster.json"
    listing = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
    path.write_text(json.dumps(version, indent=4) + "\n" + json.dumps(listing, indent=4) + "\n")
    return str(path)


def preflight(capsys, stack: str, path: str, *more: str) -> tuple[int, str, str]:
    code = main(["preflight", stack, "--from", path, *more])
    out = capsys.readouterr()
    return code, out.out, out.err


def problems(text: str) -> list[tuple[str, str]]:
    """(problem line, fix line) pairs of the text report."""
    return re.findall(r"^\d+\. (.*)\n   Fix: (.*)$", text, re.MULTILINE)


def does_not_fit(out: str, stack: str, count: int) -> bool:
    s = "s" if count != 1 else ""
    return out.rstrip().endswith(f"Verdict: {stack} does NOT fit this cluster ({count} problem{s}); fix them "
                                 "before `pulumi up`.")


def gpu_classes(rule_24gb: dict, rule_8gb: dict) -> Callable[[dict], None]:
    """A stack edit: the two GPU classes, each selected by one node selector requirement."""
    def edit(c):
        c["gpuClasses"] = {
            "gpu-24gb": {"memory": "24Gi", "effectiveTflops": 40, "nodeSelector": [rule_24gb]},
            "gpu-8gb": {"memory": "8Gi", "effectiveTflops": 15, "nodeSelector": [rule_8gb]}}
    return edit


def host(name: str) -> dict:
    return {"key": "kubernetes.io/hostname", "operator": "In", "values": [name]}


def report_for(stack: str, path: str, edit=None):
    return check(loaded(stack, edit), cluster_data.read_file(path))


# --- The lab: everything fits -------------------------------------------------------------------


def test_every_stack_fits_the_lab(capsys, stack):
    code, out, err = preflight(capsys, stack, str(LAB))
    assert (code, err) == (0, "")
    assert out.startswith(f"Preflight {stack}: {LAB}, Kubernetes v1.34.1\n")
    assert out.rstrip().endswith(f"Verdict: {stack} fits this cluster.")
    assert "Problems" not in out


def test_the_table_shows_needs_against_has_per_node(capsys):
    code, out, _ = preflight(capsys, "cross-server", str(LAB))
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith(("gpu-server ", "gpu-laptop "))}
    # 2 decode workers (7.9Gi each) + the frontend (2Gi), 2 x 2 + 1 CPUs; their GPU plan against
    # 24576Mi less 10%.
    assert re.search(r"2 x decode, 1 x frontend \(may land here\)\s+2 / 4 nvidia.com/gpu\s+13.2Gi / 21.6Gi "
                     r"\(24576Mi\)\s+17.8Gi / 62.6Gi\s+5 / 16\s+fits$", rows["gpu-server"])
    assert re.search(r"1 x prefill, 1 x frontend \(may land here\)\s+1 / 4 nvidia.com/gpu\s+4.6Gi / 7.2Gi "
                     r"\(8192Mi\)\s+7.7Gi / 15.4Gi\s+3 / 16\s+fits$", rows["gpu-laptop"])
    assert re.search(r"^gpu-8gb\s+nvidia.com/gpu.memory Lt 12000\s+1\s+gpu-laptop\s+ok$", out, re.MULTILINE)
    assert re.search(r"^kubernetes version\s+ok\s+v1.34.1 is within >=1.30.0-0", out, re.MULTILINE)


def test_json_for_ci(capsys):
    code, out, _ = preflight(capsys, "kv-routing", str(LAB), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["fits"] is True and doc["problems"] == []
    assert set(doc) == {"fits", "stack", "source", "server_version", "classes", "nodes", "checks", "problems",
                        "notes", "pending"}  # pending: the worker pods the packing leaves Pending (none here)
    assert doc["pending"] == []
    server = next(n for n in doc["nodes"] if n["name"] == "gpu-server")
    assert server["places"][0] == {"name": "worker-24gb", "replicas": 4, "bound": True}
    assert {"name": "frontend", "replicas": 1, "bound": False} in server["places"]
    resources = {r["resource"]: r for r in server["resources"]}
    assert resources["nvidia.com/gpu"] == {"resource": "nvidia.com/gpu", "needs": 4, "has": 4, "ok": True}
    assert resources["memory"]["needs"] == 4 * 3584 * 2**20 + 2 * 2**30  # bytes
    assert resources["cpu"] == {"resource": "cpu", "needs": 9, "has": 16, "ok": True}  # cores
    assert server["gpu_memory"]["reported_mib"] == 24576
    assert {c["name"] for c in doc["checks"]} == {"kubernetes version", "dynamo operator", "platform.namespace",
                                                  "graph.namespace", "pod security"}


def test_json_lists_each_problem_with_its_fix(capsys, tmp_path):
    code, out, _ = preflight(capsys, "kv-routing", saved(tmp_path, _old_server), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["fits"] is False
    (problem,) = doc["problems"]
    assert set(problem) == {"where", "check", "problem", "fix"}
    assert problem["check"] == "kubernetes version"


# --- Variants that must not fit -----------------------------------------------------------------


def _no_time_slicing(version, items):
    for name in ("gpu-server", "gpu-laptop"):
        n = node(items, name)
        for field in ("capacity", "allocatable"):
            n["status"][field]["nvidia.com/gpu"] = "1"
        labels = n["metadata"]["labels"]
        labels.pop("nvidia.com/gpu.sharing-strategy")
        labels["nvidia.com/gpu.replicas"] = "1"
        labels["nvidia.com/gpu.product"] = labels["nvidia.com/gpu.product"].removesuffix("-SHARED")


def test_without_time_slicing_the_workers_sharing_a_gpu_would_stay_pending(capsys, tmp_path):
    code, out, _ = preflight(capsys, "kv-routing", saved(tmp_path, _no_time_slicing))
    assert code == 1
    assert problems(out) == [
        ("node gpu-server: gpu units: needs 4 nvidia.com/gpu (4 x worker-24gb), allocatable 1: each worker requests "
         "one nvidia.com/gpu, so 3 of them would stay Pending",
         "Give the NVIDIA device plugin a time-slicing config so gpu-server advertises 4: `sharing: {timeSlicing: "
         "{resources: [{name: nvidia.com/gpu, replicas: 4}]}}` (its config file, `version: v1`; "
         "docs/configuration.md, 'GPU classes')"),
        ("node gpu-laptop: gpu units: needs 2 nvidia.com/gpu (2 x worker-8gb), allocatable 1: each worker requests "
         "one nvidia.com/gpu, so 1 of them would stay Pending",
         "Give the NVIDIA device plugin a time-slicing config so gpu-laptop advertises 2: `sharing: {timeSlicing: "
         "{resources: [{name: nvidia.com/gpu, replicas: 2}]}}` (its config file, `version: v1`; "
         "docs/configuration.md, 'GPU classes')"),
    ]
    assert "4 / 1 nvidia.com/gpu !" in out
    assert does_not_fit(out, "kv-routing", 2)


NO_TIME_SLICING = "tests/data/preflight/lab-no-time-slicing.json"


def test_the_shipped_example_is_the_lab_without_time_slicing(tmp_path):
    assert (ROOT / NO_TIME_SLICING).read_text() == Path(saved(tmp_path, _no_time_slicing)).read_text()


# docs/preflight.md's example is a marked sample of `preflight kv-routing --from` this file (exit 1):
# tests/test_docs_samples.py holds it to what the command prints.


def test_a_renamed_shared_resource_is_named_in_the_fix(capsys, tmp_path):
    def renamed(version, items):
        for field in ("capacity", "allocatable"):
            resources = node(items, "gpu-server")["status"][field]
            resources["nvidia.com/gpu.shared"] = resources.pop("nvidia.com/gpu")

    code, out, _ = preflight(capsys, "same-server", saved(tmp_path, renamed))
    assert code == 1 and does_not_fit(out, "same-server", 1)
    ((problem, fix),) = problems(out)
    assert problem.startswith("node gpu-server: gpu units: needs 4 nvidia.com/gpu (2 x prefill + 2 x decode), "
                              "allocatable 0")
    assert fix.startswith("gpu-server advertises nvidia.com/gpu.shared instead (the device plugin's "
                          "renameByDefault): set gpuClasses.gpu-24gb.resource: nvidia.com/gpu.shared")


def _gpu_memory_label_missing(version, items):
    node(items, "gpu-laptop")["metadata"]["labels"].pop("nvidia.com/gpu.memory")


def test_a_missing_gpu_memory_label_leaves_the_8gb_class_without_a_node(capsys, tmp_path):
    path = saved(tmp_path, _gpu_memory_label_missing)
    code, out, _ = preflight(capsys, "cross-server", path)
    assert code == 1 and does_not_fit(out, "cross-server", 1)
    assert problems(out) == [(
        "gpuClasses.gpu-8gb: node selector: no node matches nvidia.com/gpu.memory Lt 12000, so its workers would "
        "stay Pending. GPU nodes not taken by another class: gpu-laptop has no label nvidia.com/gpu.memory.",
        "Label the node that holds the gpu-8gb GPU: GPU feature discovery sets nvidia.com/gpu.memory (MiB) on every "
        "GPU node; without it, kubectl label node gpu-laptop nvidia.com/gpu.memory=<its GPU memory in MiB: "
        "nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits>")]
    assert re.search(r"^gpu-8gb\s+nvidia.com/gpu.memory Lt 12000\s+1\s+none\s+FAILS$", out, re.MULTILINE)
    # same-server places nothing on the 8GB class: the missing label does not concern it.
    assert preflight(capsys, "same-server", path)[0] == 0


def test_a_hostname_class_on_a_node_without_the_memory_label_names_the_label(tmp_path):
    by_hostname = gpu_classes(host("gpu-server"), host("gpu-laptop"))
    report = report_for("cross-server", saved(tmp_path, _gpu_memory_label_missing), by_hostname)
    (problem,) = report.problems
    assert (problem.where, problem.check) == ("node gpu-laptop", "gpu memory")
    assert problem.problem == ("has no label nvidia.com/gpu.memory, so its GPU cannot be checked against the 4.6Gi "
                               "the 1 gpu-8gb workers plan on it")
    assert "kubectl label node gpu-laptop nvidia.com/gpu.memory=<its GPU memory in MiB" in problem.fix


def test_too_little_node_memory_for_the_workers(capsys, tmp_path):
    def server_with_32gb(version, items):
        node(items, "gpu-server")["status"]["allocatable"]["memory"] = "32634280Ki"

    code, out, _ = preflight(capsys, "same-server", saved(tmp_path, server_with_32gb))
    assert code == 1 and does_not_fit(out, "same-server", 1)
    assert problems(out) == [(
        "node gpu-server: memory: needs 42.0Gi memory (2 x prefill 10.0Gi + 2 x decode 10.0Gi + 1 x frontend "
        "2.0Gi), allocatable 31.1Gi",
        "Lower the memory the workers here request (workers.prefill.memoryRequest, workers.decode.memoryRequest; "
        "not below the host memory floor `python3 dev.py sizing same-server` shows, which a smaller kvCacheBytes "
        "lowers), run fewer replicas on this node, or give gpu-server more memory")]
    assert "42.0Gi / 31.1Gi !" in out and "DOES NOT FIT" in out


def test_the_frontend_is_counted_where_the_scheduler_may_put_it(capsys, tmp_path):
    def laptop_with_8gb(version, items):
        node(items, "gpu-laptop")["status"]["allocatable"]["memory"] = "7848268Ki"

    code, out, _ = preflight(capsys, "cross-server", saved(tmp_path, laptop_with_8gb))
    assert code == 1 and does_not_fit(out, "cross-server", 1)
    assert problems(out) == [(
        "node gpu-laptop: memory: needs 7.7Gi memory (1 x prefill 5.7Gi + 1 x frontend 2.0Gi), allocatable 7.5Gi",
        "What is bound here fits, but not with the pods beside it that have no node affinity, which the scheduler "
        "may place here first. Lower frontend.memory, or free memory on gpu-laptop")]


def _old_server(version, items):
    version["serverVersion"].update(minor="29", gitVersion="v1.29.15")


def test_an_old_server_is_refused_by_the_charts_kube_version(capsys, tmp_path):
    code, out, _ = preflight(capsys, "cross-server", saved(tmp_path, _old_server))
    assert code == 1 and does_not_fit(out, "cross-server", 1)
    assert problems(out) == [(
        "cluster: kubernetes version: the server is v1.29.15; the dynamo-platform chart declares kubeVersion "
        ">=1.30.0-0 (its CRDs rely on the validation ratcheting Kubernetes 1.30 turned on), so Helm refuses to "
        "install it",
        "Upgrade the cluster to a Kubernetes version within that range (the lab runs v1.34)")]
    assert re.search(r"^kubernetes version\s+FAILS\s+v1.29.15 is NOT within >=1.30.0-0", out, re.MULTILINE)


def _second_operator(version, items):
    items += json.loads((DATA / "other-dynamo.json").read_text())["items"]


def test_a_second_operator_is_refused_while_this_stack_manages_the_platform(capsys, tmp_path):
    code, out, _ = preflight(capsys, "kv-routing", saved(tmp_path, _second_operator))
    assert code == 1 and does_not_fit(out, "kv-routing", 1)
    ((problem, fix),) = problems(out)
    assert problem == (
        "platform: dynamo operator: a Dynamo operator is already installed (Deployment "
        "dynamo-cloud/dynamo-platform-dynamo-operator-controller-manager; Helm release dynamo-platform in "
        "dynamo-cloud; webhooks ValidatingWebhookConfiguration/dynamo-platform-dynamo-operator-validating, "
        "MutatingWebhookConfiguration/dynamo-platform-dynamo-operator-mutating; conversion webhook of "
        "dynamocomponentdeployments.nvidia.com, dynamographdeployments.nvidia.com); this stack would install a "
        "second cluster-wide one (release dynamo-platform in dynamo-system), and the two would fight over the same "
        "CRDs and admission webhooks")
    assert fix == ("Uninstall it (`helm uninstall dynamo-platform -n dynamo-cloud`), or use it from this stack: "
                   "`pulumi config set --path platform.manage false --stack kv-routing`")
    assert re.search(r"^dynamo operator\s+FAILS\s+another installation in dynamo-cloud$", out, re.MULTILINE)


def test_with_platform_management_off_the_installed_operator_is_used(tmp_path):
    path = saved(tmp_path, _second_operator)
    report = report_for("kv-routing", path, lambda c: c.update(platform={"manage": False}))
    assert report.fits, report.problems
    (operator,) = [c for c in report.checks if c.name == "dynamo operator"]
    assert operator.detail == "uses the operator in dynamo-cloud (platform.manage: false)"
    # ... and without one installed, there is nothing to use.
    report = report_for("kv-routing", str(LAB), lambda c: c.update(platform={"manage": False}))
    (problem,) = report.problems
    assert problem.problem == ("platform.manage is false, so this stack relies on an installed operator, but no "
                               "Dynamo operator is installed")


def test_leftover_dynamo_webhooks_without_an_operator_are_found(tmp_path):
    def leftovers(version, items):
        items += [i for i in json.loads((DATA / "other-dynamo.json").read_text())["items"]
                  if i["kind"].endswith("WebhookConfiguration")]

    report = report_for("cross-server", saved(tmp_path, leftovers))
    (problem,) = report.problems
    assert problem.check == "dynamo webhooks"
    assert "where no Dynamo operator runs" in problem.problem
    assert problem.fix == ("Delete them: kubectl delete validatingwebhookconfiguration "
                           "dynamo-platform-dynamo-operator-validating; kubectl delete mutatingwebhookconfiguration "
                           "dynamo-platform-dynamo-operator-mutating")


def test_dynamo_crds_owned_by_another_helm_release_are_refused(tmp_path):
    def crd_chart(version, items):
        crd = next(i for i in json.loads((DATA / "other-dynamo.json").read_text())["items"]
                   if i["metadata"]["name"] == "dynamographdeployments.nvidia.com")
        crd["spec"]["conversion"] = {"strategy": "None"}
        crd["metadata"]["annotations"] = {"meta.helm.sh/release-name": "dynamo-crds",
                                          "meta.helm.sh/release-namespace": "default"}
        items.append(crd)

    report = report_for("cross-server", saved(tmp_path, crd_chart))
    (problem,) = report.problems
    assert problem.problem.startswith("dynamographdeployments.nvidia.com belong to Helm release dynamo-crds in "
                                      "default")
    assert problem.fix.startswith("Uninstall that release (`helm uninstall dynamo-crds -n default`")


# --- Namespaces: free, or already this stack's ---------------------------------------------------


def _namespace(name: str, labels: Optional[dict] = None, phase: str = "Active") -> Callable:
    def add(version, items):
        items.append({"apiVersion": "v1", "kind": "Namespace", "status": {"phase": phase},
                      "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}}})
    return add


def test_the_graph_namespace_may_be_this_stacks_own(tmp_path):
    ours = _namespace("dynamo-lab-cross-server", {"dynamo-lab/stack": "cross-server"})
    report = report_for("cross-server", saved(tmp_path, ours))
    assert report.fits
    assert [c.detail for c in report.checks if c.name == "graph.namespace"] == [
        "dynamo-lab-cross-server is this stack's (dynamo-lab/stack=cross-server)"]


def test_a_graph_namespace_someone_else_made_is_refused(tmp_path):
    report = report_for("cross-server", saved(tmp_path, _namespace("dynamo-lab-cross-server")))
    (problem,) = report.problems
    assert problem.problem == ("namespace dynamo-lab-cross-server exists and is not this stack's (no "
                               "dynamo-lab/stack label): `pulumi up` would take it over, and `pulumi destroy` would "
                               "delete it with everything in it")
    assert problem.fix.endswith("`kubectl label namespace dynamo-lab-cross-server dynamo-lab/stack=cross-server`")


def test_a_platform_namespace_another_stack_owns_points_at_platform_manage(tmp_path):
    theirs = _namespace("dynamo-system", {"dynamo-lab/stack": "kv-routing"})
    report = report_for("cross-server", saved(tmp_path, theirs))
    (problem,) = report.problems
    assert problem.where == "platform.namespace"
    assert problem.fix.startswith("Let stack kv-routing own the platform and use it from this one: `pulumi config "
                                  "set --path platform.manage false --stack cross-server`")


def test_turning_platform_management_off_under_other_stacks_graphs_is_refused(tmp_path):
    # cross-server installed the platform; kv-routing's graph relies on it. Uninstalling the operator
    # now would leave kv-routing's DynamoGraphDeployment with a finalizer nobody removes.
    def edit(version, items):
        _namespace("dynamo-system", {"dynamo-lab/stack": "cross-server"})(version, items)
        _namespace("dynamo-lab-kv-routing", {"dynamo-lab/stack": "kv-routing"})(version, items)
    path = saved(tmp_path, edit)
    off = {"platform": {"manage": False}}
    problem = next(p for p in report_for("cross-server", path, lambda c: c.update(off)).problems
                   if p.check == "dynamo operator removal")
    assert "`pulumi up` would uninstall the operator while other stacks' graph namespaces remain: " \
           "dynamo-lab-kv-routing (stack kv-routing)" in problem.problem
    assert problem.fix.startswith("Destroy those stacks first (`pulumi destroy --stack kv-routing`)")
    # Without another stack's graph there is nothing to strand.
    alone = saved(tmp_path, _namespace("dynamo-system", {"dynamo-lab/stack": "cross-server"}))
    assert all(p.check != "dynamo operator removal"
               for p in report_for("cross-server", alone, lambda c: c.update(off)).problems)


def _pod_security_row(report) -> str:
    (detail,) = [c.detail for c in report.checks if c.name == "pod security"]
    return detail


def test_preflight_says_which_pod_security_level_the_graph_namespace_will_enforce_and_why(tmp_path):
    assert _pod_security_row(report_for("cross-server", str(LAB))) == (
        "dynamo-lab-cross-server will enforce baseline (`pulumi up` labels it): the model cache's preparation "
        "step runs as root (restricted refuses it, baseline allows it); it does not exist yet")
    pvc = report_for("cross-server", str(LAB), lambda c: c.update(modelCache={"mode": "off"}))
    assert _pod_security_row(pvc).startswith("dynamo-lab-cross-server will enforce restricted (`pulumi up` labels "
                                             "it): every pod of the stack meets restricted")
    ours = _namespace("dynamo-lab-cross-server", {"dynamo-lab/stack": "cross-server",
                                                  "pod-security.kubernetes.io/enforce": "restricted"})
    assert _pod_security_row(report_for("cross-server", saved(tmp_path, ours))).endswith("it enforces restricted now")
    unlabelled = _namespace("dynamo-lab-cross-server", {"dynamo-lab/stack": "cross-server"})
    assert "no Pod Security label now" in _pod_security_row(report_for("cross-server", saved(tmp_path, unlabelled)))


def test_a_terminating_namespace_must_be_gone_first(tmp_path):
    gone = _namespace("dynamo-lab-cross-server", {"dynamo-lab/stack": "cross-server"}, "Terminating")
    (problem,) = report_for("cross-server", saved(tmp_path, gone)).problems
    assert problem.problem == "namespace dynamo-lab-cross-server is being deleted"


# --- Placement: one node per class, schedulable ---------------------------------------------------


def test_a_class_on_a_label_of_its_own_says_which_label_to_set(tmp_path):
    own_label = gpu_classes({"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20000"]},
                            {"key": "lab.example/gpu-class", "operator": "In", "values": ["8gb"]})
    (problem,) = report_for("cross-server", str(LAB), own_label).problems
    assert problem.problem.endswith("GPU nodes not taken by another class: gpu-laptop has no label "
                                    "lab.example/gpu-class.")
    assert problem.fix == "Label the node that holds the gpu-8gb GPU: kubectl label node gpu-laptop " \
                          "lab.example/gpu-class=8gb"


def test_a_class_matching_more_nodes_than_it_plans_is_a_note_with_one_model_cache(tmp_path):
    """Issue 34: a class may select several nodes. same-server plans one (gpuClasses' default nodes: 1)
    with every worker on its GPU; a second server can only lower that sharing. Without a cache on each
    node (off here; pvc alike) the workers find the model on either node: a note. With a cache on each
    node (nodeVolume, the stack's own), the pre-pull fills one: a problem (test_node_sharing.py)."""
    def second_big_node(version, items):
        twin = copy.deepcopy(node(items, "gpu-server"))
        twin["metadata"]["name"] = twin["metadata"]["labels"]["kubernetes.io/hostname"] = "gpu-server-2"
        items.append(twin)

    report = report_for("same-server", saved(tmp_path, second_big_node),
                        lambda c: c.update(modelCache={"mode": "off"}))
    assert report.fits, report.problems
    (note,) = report.notes
    assert note.startswith("gpuClasses.gpu-24gb: its node selector matches 2 nodes (gpu-server, gpu-server-2), "
                           "more than the 1 it plans (gpuClasses.gpu-24gb.nodes): the sizing planned the sharing of "
                           "each GPU for 1, so it may be lower here, never higher")
    (problem,) = report_for("same-server", saved(tmp_path, second_big_node)).problems
    assert (problem.where, problem.check) == ("gpuClasses.gpu-24gb", "nodes")


def test_two_classes_on_one_node_are_refused(tmp_path):
    problems_ = report_for("cross-server", str(LAB), gpu_classes(host("gpu-server"), host("gpu-server"))).problems
    assert [p.problem for p in problems_] == [
        "gpu-24gb and gpu-8gb all select node gpu-server; the sizing plans one GPU per class, so their workers would "
        "share a GPU whose memory it never checked for all of them"]


def test_a_tainted_or_cordoned_node_takes_none_of_the_pods(tmp_path):
    def tainted(version, items):
        node(items, "gpu-server")["spec"]["taints"] = [
            {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
            {"key": "soft", "effect": "PreferNoSchedule"}]
        node(items, "gpu-laptop")["spec"]["unschedulable"] = True

    found = {p.where: p for p in report_for("cross-server", saved(tmp_path, tainted)).problems}
    assert found["node gpu-server"].fix.startswith(
        "Make it schedulable: kubectl taint nodes gpu-server node-role.kubernetes.io/control-plane:NoSchedule-")
    assert found["node gpu-laptop"].fix.startswith("Make it schedulable: kubectl uncordon gpu-laptop")
    assert found["frontend"].problem == "every node is cordoned or tainted: it would stay Pending"


def test_a_gpu_reporting_less_than_its_class_fails_only_where_the_plan_needs_it(tmp_path):
    def laptop_8000(version, items):
        node(items, "gpu-laptop")["metadata"]["labels"]["nvidia.com/gpu.memory"] = "8000"

    path = saved(tmp_path, laptop_8000)
    # cross-server pins a 2Gi pool: its plan (4.6Gi) leaves room under 8000Mi less 10%.
    report = report_for("cross-server", path)
    assert report.fits
    assert report.notes == ["node gpu-laptop: its GPU reports 8000Mi, less than gpu-8gb's 8.0Gi; the plan (4.6Gi) "
                            "still fits its 7.0Gi budget"]
    # kv-routing derives its pools from the class's 8188Mi, filling the 10% reserve to the MiB: on a
    # card reporting 8000Mi it does not fit.
    (problem,) = report_for("kv-routing", path).problems
    assert (problem.where, problem.check) == ("node gpu-laptop", "gpu memory")
    assert problem.fix.startswith("Plan for the GPU you have: gpuClasses.gpu-8gb.memory: 8000Mi")


def test_the_shipped_stacks_fit_the_cards_the_lab_reports(tmp_path):
    def lab_cards(version, items):
        node(items, "gpu-laptop")["metadata"]["labels"]["nvidia.com/gpu.memory"] = "8188"
        node(items, "gpu-server")["metadata"]["labels"]["nvidia.com/gpu.memory"] = "24564"

    path = saved(tmp_path, lab_cards)
    for stack in ("cross-server", "same-server", "kv-routing"):
        assert report_for(stack, path).fits, stack


def test_the_probe_and_benchmark_jobs_are_counted_where_they_run(tmp_path):
    report = report_for("cross-server", str(LAB), everything_on("cross-server"))
    laptop = next(n for n in report.nodes if n.name == "gpu-laptop")
    # The connector pulls (READ): the probe's target sits with the prefill group on the laptop, and
    # the initiator with the decode group on the server.
    assert [(p.name, p.bound) for p in laptop.places] == [
        ("prefill", True), ("probe target Job", True), ("frontend", False), ("benchmark Job", False)]
    server = next(n for n in report.nodes if n.name == "gpu-server")
    assert ("probe initiator Job", True) in [(p.name, p.bound) for p in server.places]
    memory = next(r for r in laptop.resources if r.resource == "memory")
    # prefill 5837Mi + probe target 3072Mi (the prefill worker's 2Gi pool + 1Gi) + frontend 2Gi + benchmark 4Gi
    assert memory.needs == (5837 + 3072 + 2048 + 4096) * 2**20


# --- The saved-data format docs/preflight.md documents ----------------------------------------------------


def test_the_preflight_page_documents_the_command_whose_output_the_code_reads():
    readme = (ROOT / "docs" / "preflight.md").read_text()
    command = cluster_data.save_command(ClusterTarget(context="dynamo-lab"))
    assert command in readme
    assert command == ("{ kubectl --context dynamo-lab version -o json; kubectl --context dynamo-lab get "
                       "nodes,namespaces,deployments,customresourcedefinitions,validatingwebhookconfigurations,"
                       "mutatingwebhookconfigurations,storageclasses -A -o json; } > cluster.json")
    assert "python3 dev.py preflight cross-server --from cluster.json" in readme
    # The lab's file is what that command writes: the version, then one List of those kinds.
    version, listing = cluster_data.documents(LAB.read_text(), str(LAB))
    assert set(version) >= {"clientVersion", "serverVersion"} and listing["kind"] == "List"
    kinds = {i["kind"] for i in listing["items"]}
    assert kinds == {"Node", "Namespace", "Deployment", "CustomResourceDefinition"}
    assert kinds <= set(cluster_data.RESOURCES.values())


def test_the_save_command_reads_the_stacks_own_kubeconfig_and_writes_elsewhere():
    target = ClusterTarget(context="my lab", kubeconfig="~/.kube/lab.yaml")
    where = "--kubeconfig ~/.kube/lab.yaml --context 'my lab'"
    assert cluster_data.save_command(target) == (
        f"{{ kubectl {where} version -o json; kubectl {where} get {','.join(cluster_data.RESOURCES)} -A -o json; }}"
        " > cluster.json")  # never over the kubeconfig it reads


@pytest.mark.parametrize("content, message", [
    ("", "no server version in it"),
    ("{not json", "not JSON at line 1"),
    ('{"clientVersion": {"gitVersion": "v1.34.1"}}\n{"kind": "List", "items": []}', "no server version in it"),
    ('{"serverVersion": {"gitVersion": "v1.34.1"}}\n{"kind": "List", "items": []}', "no Node objects in it"),
])
def test_a_file_that_is_not_saved_cluster_data_is_exit_2(capsys, tmp_path, content, message):
    path = tmp_path / "cluster.json"
    path.write_text(content)
    code, out, err = preflight(capsys, "cross-server", str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: dynamo-lab preflight: {path}: {message}") and err.count("\n") == 1


def test_a_missing_file_is_exit_2(capsys, tmp_path):
    code, out, err = preflight(capsys, "cross-server", str(tmp_path / "nope.json"))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: dynamo-lab preflight: cannot read {tmp_path / 'nope.json'}:")


# --- graph.networkPolicy: the DNS the policies let the pods reach --------------------------------

NETWORK_POLICY = {"graph": {"networkPolicy": True}}


def test_with_network_policies_the_labs_dns_is_where_they_let_the_pods_reach_it():
    r = report_for("cross-server", str(LAB), lambda c: c.update(NETWORK_POLICY))
    assert r.problems == []
    (dns,) = [c for c in r.checks if c.name == "network policy: dns"]
    assert dns.ok and dns.detail.startswith("kube-system/coredns runs pods labelled k8s-app=kube-dns")
    assert any("preflight does not read its addresses" in n for n in r.notes)
    assert not any(c.name == "network policy: dns" for c in report_for("cross-server", str(LAB)).checks)


def test_a_cluster_whose_dns_pods_the_policies_miss_does_not_fit(tmp_path):
    def relabel(version, items):
        for i in items:
            if i["kind"] == "Deployment" and i["metadata"]["name"] == "coredns":
                i["spec"]["template"]["metadata"]["labels"] = {"app": "coredns"}
    r = report_for("cross-server", saved(tmp_path, relabel), lambda c: c.update(NETWORK_POLICY))
    assert [(p.where, p.check) for p in r.problems] == [("graph.networkPolicy", "network policy: dns")]
    assert "every name lookup, the Services' and the Hub's, would time out" in r.problems[0].problem
    assert not r.fits
