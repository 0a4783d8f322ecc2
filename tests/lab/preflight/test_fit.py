"""Preflight's nodes and classes on variants of the lab's saved output: where the stack's pods land
(one node per class, schedulable), and whether they fit there (GPU units, GPU memory, node memory
and CPU, the frontend and the Jobs where they may run); each asserts the exit code, the verdict
and the fix a user would follow."""

from __future__ import annotations

import copy
import re
from pathlib import Path

from tests.helpers import ROOT, everything_on
from tests.lab.preflight.saved_lab import (
    LAB,
    does_not_fit,
    gpu_classes,
    host,
    node,
    preflight,
    problems,
    report_for,
    saved,
)

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
