"""Where the stack's pods land, and whether they fit there.

GPU classes find their nodes first (classes.py). Per node: the requests of every pod placed there
against the node's allocatable (memory, CPU, GPU units: one per worker), and the GPU's reported
memory (GPU feature discovery's `nvidia.com/gpu.memory`, MiB) against what the sizing plans for
the workers sharing it.

Placement (docs/preflight.md): a pod whose node affinity matches exactly one node is bound to it.
A pod that may land on several nodes (the frontend has no node affinity) is counted on every node
that has pods bound to it, since the scheduler may put it there, even before the workers; and at
least one node must have room for it. Cordoned nodes and nodes with a NoSchedule or NoExecute
taint take none of the stack's pods (dynamo-lab sets no tolerations).
"""

from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction
from typing import Optional

from infra import units
from infra.catalogue import GPU_MEMORY_LABEL
from infra.config.models import StackConfig
from infra.lab.preflight import classes, selectors
from infra.lab.preflight.classes import NVIDIA_SMI_MEMORY
from infra.lab.preflight.cluster_data import ClusterData, Node
from infra.lab.preflight.report import GpuMemory, Need, NodeRow, Placed, Problem, Report
from infra.lab.preflight.workloads import PodGroup
from infra.manifests.graph import describe_term
from infra.sizing import StackSizing, gpu_budget

GPU_COUNT_LABEL = "nvidia.com/gpu.count"


def fmt(resource: str, value: Fraction) -> str:
    if resource == "memory":
        return units.human(float(value))
    if resource == "cpu" and (value * 1000).denominator == 1:
        return units.format_cpu(int(value * 1000))
    return str(int(value)) if value.denominator == 1 else f"{float(value):g}"


def _int(text: Optional[str]) -> Optional[int]:
    return int(text) if text is not None and text.isdigit() else None


def blocked(node: Node) -> Optional[str]:
    """Why the stack's pods cannot be scheduled on a node at all, or None."""
    if node.unschedulable:
        return "cordoned"
    if node.taints:
        return f"tainted {', '.join(node.taints)}"
    return None


# --- Nodes --------------------------------------------------------------------------------------


def _gpu_units_fix(node: Node, resource: str, need: Fraction, has: Fraction, gpu_class: str) -> str:
    base = resource.removesuffix(".shared")
    replicas = math.ceil(need / (_int(node.labels.get(GPU_COUNT_LABEL)) or 1))
    config = f"sharing: {{timeSlicing: {{resources: [{{name: {base}, replicas: {replicas}}}]}}}}"
    slicing = (f"give the NVIDIA device plugin a time-slicing config so {node.name} advertises {fmt(resource, need)}: "
               f"`{config}` (its config file, `version: v1`; docs/configuration.md, 'GPU classes')")
    if has == 0:
        other = next((k for k, v in node.allocatable.items() if k.startswith(base) and k != resource and v > 0), None)
        if other:
            return (f"{node.name} advertises {other} instead (the device plugin's renameByDefault): set "
                    f"gpuClasses.{gpu_class}.resource: {other}; if it advertises fewer than {fmt(resource, need)}, "
                    f"also {slicing}")
        return f"Install the NVIDIA device plugin (or the GPU operator) on {node.name}, and {slicing}"
    return slicing[0].upper() + slicing[1:]


def _short(node: Node, resource: str, need: Fraction, has: Fraction, bound_need: Fraction,
           parts: list[str], bound: list[PodGroup], gpu_class: Optional[str], stack: str) -> Problem:
    what = f"needs {fmt(resource, need)} {resource} ({' + '.join(parts)}), allocatable {fmt(resource, has)}"
    if resource not in ("memory", "cpu"):
        return Problem(f"node {node.name}", "gpu units",
                       f"{what}: each worker requests one {resource}, so {fmt(resource, need - has)} of them "
                       "would stay Pending", _gpu_units_fix(node, resource, need, has, gpu_class or "?"))
    groups = [w.name for w in bound if w.kind == "worker"]
    if bound_need <= has:
        fix = (f"What is bound here fits, but not with the pods beside it that have no node affinity, which the "
               f"scheduler may place here first. Lower frontend.{resource}"
               f"{' (and the benchmark Job)' if any('benchmark' in p for p in parts) else ''}, "
               f"or free {resource} on {node.name}")
    elif resource == "memory":
        fix = (f"Lower the memory the workers here request ({', '.join(f'workers.{g}.memoryRequest' for g in groups)}"
               f"; not below the host memory floor `python3 dev.py sizing {stack}` shows, which a smaller "
               f"kvCacheBytes lowers), run fewer replicas on this node, or give {node.name} more memory")
    else:
        fix = (f"Lower {', '.join(f'workers.{g}.cpuRequest' for g in groups)}, run fewer replicas on this node, "
               f"or give {node.name} more CPUs")
    return Problem(f"node {node.name}", resource, what, fix)


def _gpu_memory(cfg: StackConfig, sizing: StackSizing, node: Node, gpu_class: str,
                report: Report) -> Optional[GpuMemory]:
    fits = next((g for g in sizing.gpus if g.gpu_class == gpu_class), None)
    if fits is None:
        return None
    cls = cfg.gpu_classes[gpu_class]
    mib = _int(node.labels.get(GPU_MEMORY_LABEL))
    if mib is None:
        found = node.labels.get(GPU_MEMORY_LABEL)
        report.problems.append(Problem(
            f"node {node.name}", "gpu memory",
            (f"has no label {GPU_MEMORY_LABEL}" if found is None else f"{GPU_MEMORY_LABEL}={found} is not MiB")
            + f", so its GPU cannot be checked against the {units.human(fits.planned_bytes)} the {fits.workers} "
            f"{gpu_class} workers plan on it",
            f"Install GPU feature discovery (it sets {GPU_MEMORY_LABEL}), or label the node yourself: kubectl label "
            f"node {node.name} {GPU_MEMORY_LABEL}=<its GPU memory in MiB: {NVIDIA_SMI_MEMORY}> --overwrite"))
        return GpuMemory(gpu_class, fits.planned_bytes, None, None, False)
    budget = gpu_budget(cls, mib * units.MI)
    ok = fits.planned_bytes <= budget
    if not ok:
        report.problems.append(Problem(
            f"node {node.name}", "gpu memory",
            f"the {fits.workers} {gpu_class} workers plan {units.human(fits.planned_bytes)} on its GPU, which "
            f"reports {mib}Mi: {units.human(budget)} after the class's {cls.memory_reserve:.0%} reserve "
            f"(the sizing planned for {units.human(cls.memory)})",
            f"Plan for the GPU you have: gpuClasses.{gpu_class}.memory: {mib}Mi (gpuClasses replaces the defaults, "
            "so copy both classes from docs/configuration.md and change this one); or lower kvCacheBytes, or run fewer "
            "workers on this class"))
    elif mib * units.MI < cls.memory:
        report.notes.append(f"node {node.name}: its GPU reports {mib}Mi, less than {gpu_class}'s "
                            f"{units.human(cls.memory)}; the plan ({units.human(fits.planned_bytes)}) still "
                            f"fits its {units.human(budget)} budget")
    return GpuMemory(gpu_class, fits.planned_bytes, mib, budget, ok)


def _bind(work: list[PodGroup], data: ClusterData, class_node: dict[str, Node], report: Report):
    """Workloads bound to one node, and those that may land on several (with their candidates)."""
    bound: dict[str, list[PodGroup]] = defaultdict(list)
    floating: list[tuple[PodGroup, list[Node]]] = []
    for w in work:
        if w.gpu_class is not None and w.gpu_class not in class_node:
            continue  # its class's problem says why it has no node
        if w.affinity is None:
            candidates = list(data.nodes)
        else:
            candidates = [n for n in data.nodes if selectors.term_matches(w.affinity, n.labels)]
            if not candidates:
                rule = describe_term(w.affinity)
                report.problems.append(Problem(w.name, "node selector", f"no node matches {rule}; it would stay "
                                               "Pending", "Change benchmark.nodeSelector to match a node"))
                continue
        if len(candidates) == 1:
            bound[candidates[0].name].append(w)
        else:
            floating.append((w, [n for n in candidates if not blocked(n)]))
    return bound, floating


def _totals(pods: list[PodGroup]) -> tuple[dict[str, Fraction], dict[str, list[str]]]:
    total: dict[str, Fraction] = defaultdict(Fraction)
    parts: dict[str, list[str]] = defaultdict(list)
    for w in pods:
        for resource, each in w.requests.items():
            total[resource] += each * w.replicas
            each_text = f" {fmt(resource, each)}" if resource in ("memory", "cpu") else ""
            parts[resource].append(f"{w.replicas} x {w.name}{each_text}")
    return total, parts


def nodes_and_classes(cfg: StackConfig, sizing: StackSizing, data: ClusterData, work: list[PodGroup],
                      report: Report) -> None:
    class_node = classes.place(cfg, sizing, data, report)
    bound, floating = _bind(work, data, class_node, report)
    class_on = {node.name: name for name, node in class_node.items()}
    bound_totals = {node.name: _totals(bound[node.name])[0] for node in data.nodes}
    for node in data.nodes:
        mine = bound[node.name]
        extra = [w for w, candidates in floating if any(c.name == node.name for c in candidates)]
        if not mine:
            report.nodes.append(NodeRow(node.name, [Placed(w.name, w.replicas, False) for w in extra], [], None, True))
            continue
        problems_before = len(report.problems)
        reason = blocked(node)
        if reason:
            command = (f"kubectl uncordon {node.name}" if reason == "cordoned" else
                       "; ".join(f"kubectl taint nodes {node.name} {t}-" for t in node.taints))
            report.problems.append(Problem(
                f"node {node.name}", "schedulable",
                f"is {reason}: {', '.join(w.name for w in mine)} would stay Pending (dynamo-lab sets no tolerations)",
                f"Make it schedulable: {command}; or point the class's nodeSelector at another node"))
        total, parts = _totals(mine + extra)
        needs = []
        order = sorted(total, key=lambda r: (r in ("memory", "cpu"), r != "memory", r))
        for resource in order:
            has = node.allocatable.get(resource, Fraction(0))
            ok = total[resource] <= has
            needs.append(Need(resource, total[resource], has, ok))
            if not ok:
                report.problems.append(_short(node, resource, total[resource], has, bound_totals[node.name][resource],
                                              parts[resource], mine, class_on.get(node.name), report.stack))
        gpu = _gpu_memory(cfg, sizing, node, class_on[node.name], report) if node.name in class_on else None
        places = [Placed(w.name, w.replicas, True) for w in mine] + [Placed(w.name, w.replicas, False) for w in extra]
        report.nodes.append(NodeRow(node.name, places, needs, gpu, len(report.problems) == problems_before))
    _floating_room(floating, bound_totals, report)


def _floating_room(floating: list[tuple[PodGroup, list[Node]]], bound_totals: dict[str, dict[str, Fraction]],
                   report: Report) -> None:
    """Each pod without a node of its own needs room on at least one node where what is bound fits."""
    for w, candidates in floating:
        roomy, checked = False, 0
        for node in candidates:
            used = bound_totals[node.name]
            if any(used[r] > node.allocatable.get(r, Fraction(0)) for r in used):
                continue  # that node's own problem is reported already
            checked += 1
            if all(used[r] + q * w.replicas <= node.allocatable.get(r, Fraction(0)) for r, q in w.requests.items()):
                roomy = True
                break
        if not candidates:
            report.problems.append(Problem(w.name, "schedulable", "every node is cordoned or tainted: it would "
                                           "stay Pending", "Make a node schedulable (kubectl uncordon NODE)"))
        elif checked and not roomy:
            asks = ", ".join(f"{fmt(r, q)} {r}" for r, q in w.requests.items())
            report.problems.append(Problem(
                w.name, "room", f"no node has room for it ({w.replicas} x {asks}) beside the pods bound there",
                f"Lower frontend.cpu / frontend.memory{' (or the benchmark Job)' if 'benchmark' in w.name else ''}, "
                "or add a node"))
