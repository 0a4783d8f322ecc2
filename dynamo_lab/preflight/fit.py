"""Where the stack's pods land, and whether they fit there.

GPU classes find their nodes first (classes.py). Per node: the requests of every pod placed there
against the node's allocatable (memory, CPU, GPU units: one per worker), and the GPU's reported
memory (GPU feature discovery's `nvidia.com/gpu.memory`, MiB) against what the sizing plans for
the workers sharing it.

Placement (docs/preflight.md): the workers are packed node by node as kube-scheduler would place
them (packing.py: node affinity, resources, the groups' spread rules, taints and cordons); a
Pending worker whose node affinity leaves it one node is counted among that node's needs, so the
node's problem says why. A Job whose node affinity matches exactly one node is bound to it. A pod
that may land on several nodes (the frontend has no node affinity) is counted on every node that
has pods bound to it, since the scheduler may put it there, even before the workers; and at least
one node must have room for it. Cordoned nodes and nodes with a NoSchedule or NoExecute taint take
none of the stack's pods (dynamo-lab sets no tolerations).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

from dynamo_lab.preflight import classes, gpus, packing, selectors
from dynamo_lab.preflight.classes import NVIDIA_SMI_MEMORY
from dynamo_lab.preflight.cluster_data import ClusterData, Node
from dynamo_lab.preflight.pods import PodGroup
from dynamo_lab.preflight.report import GpuMemory, Need, NodeRow, PendingPod, Placed, Problem, Report
from dynamo_lab.preflight.shortfall import fmt, rdma_fix, short
from infra import units
from infra.catalogue import GPU_MEMORY_LABEL
from infra.config.schema import StackConfig
from infra.manifests.graph import describe_term
from infra.resolved import ResolvedStack
from infra.sizing import StackSizing, gpu_budget


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


def _gpu_memory(cfg: StackConfig, sizing: StackSizing, node: Node, gpu_class: str,
                report: Report, workers: int) -> Optional[GpuMemory]:
    """The GPU check of one node: the sizing's per-GPU plan (GpuFit.planned_bytes, the `sharing`
    largest workers of the class on one GPU) against the GPU the node reports; the workers the
    packing put here and how many of them may share one GPU as the node is (gpus.sharing_here) are
    recorded, and compared with the plan's `sharing` by the caller."""
    fits = next((g for g in sizing.gpus if g.gpu_class == gpu_class), None)
    if fits is None:
        return None
    cls = cfg.gpu_classes[gpu_class]
    sharing = gpus.sharing_here(cls, node, workers)
    more = {"workers": workers, "sharing": sharing, "planned_sharing": fits.sharing}
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
        return GpuMemory(gpu_class, fits.planned_bytes, None, None, False, **more)
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
    return GpuMemory(gpu_class, fits.planned_bytes, mib, budget, ok and sharing <= fits.sharing, **more)


def _bind(work: list[PodGroup], data: ClusterData, report: Report):
    """The pods without a worker group's spread (the frontend, the Jobs): those bound to one node, and
    those that may land on several (with their candidates)."""
    bound: dict[str, list[PodGroup]] = defaultdict(list)
    floating: list[tuple[PodGroup, list[Node]]] = []
    for w in work:
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


@dataclass
class _Placement:
    """The packing, read per node: each group's pods placed there, and the Pending pods whose node
    affinity leaves them only this node (counted as its needs, as the scheduler's reason is that
    node's)."""

    packed: packing.Packing
    here: dict[str, dict[str, int]]  # node -> group -> pods placed
    wanting: dict[str, dict[str, int]]  # node -> group -> Pending pods that have only this node
    owner: dict[str, str]  # Pending pod -> the one node it wants

    @classmethod
    def of(cls, packed: packing.Packing, nodes: list[Node]) -> "_Placement":
        here: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        wanting: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        owner = {}
        for node, pods in packed.placed.items():
            for p in pods:
                here[node][p.group.name] += 1
        for p in packed.order:
            if p.name in packed.pending:
                only = [n for n in nodes if packing.affine(p, n)]
                if len(only) == 1:
                    wanting[only[0].name][p.group.name] += 1
                    owner[p.name] = only[0].name
        return cls(packed, here, wanting, owner)

    def waiting(self, node: str) -> list[str]:
        return [p for p, n in self.owner.items() if n == node]

    def workers_here(self, node: str, stack: ResolvedStack, gpu_class: str) -> int:
        return sum(self.here[node][g.name] for g in stack.placement.active_on(gpu_class))

    def on(self, node: str, work: list[PodGroup]) -> list[PodGroup]:
        """The worker groups on `node` (placed and wanting), each with that many replicas."""
        return [dataclasses.replace(w, replicas=n) for w in work if w.kind == "worker"
                if (n := self.here[node][w.name] + self.wanting[node][w.name])]


def _pending_words(pods: list[packing.GroupPod], packed: packing.Packing) -> str:
    names = ", ".join(p.name for p in pods)
    reasons = sorted({packed.pending[p.name] for p in pods})
    return f"{len(pods)} of its pods would stay Pending ({names}): the scheduler would say \"{'; '.join(reasons)}\""


def _pending_fix(stack: ResolvedStack, group: PodGroup, reasons: str, nodes: list[Node]) -> str:
    g = next(w for w in stack.config.workers if w.name == group.name)
    cls = stack.config.gpu_classes[g.gpu_class]
    fixes = []
    rdma = cls.rdma_resource
    if rdma is not None and f"Insufficient {rdma}" in reasons:
        # The RDMA device plugin's resource, not the GPUs': which nodes of the class lack it.
        lacking = [n for n in nodes if packing.affine(packing.GroupPod(group.name, group), n)
                   and n.allocatable.get(rdma, Fraction(0)) < group.requests.get(rdma, 1)]
        fixes.append(rdma_fix(g.gpu_class, rdma, ", ".join(n.name for n in lacking) or "the class's nodes",
                              lacking[0] if lacking else None,
                              lacking[0].allocatable.get(rdma, Fraction(0)) if lacking else Fraction(0)))
    if packing.ANTI_AFFINITY in reasons:
        fixes.append(f"spread onePerNode puts one replica on each node: write workers.{g.name}.spread: even, or "
                     f"lower workers.{g.name}.replicas to the class's nodes")
    if packing.SPREAD in reasons:
        fixes.append("spread even counts every node the class selects, cordoned and tainted ones too "
                     "(nodeTaintsPolicy Ignore): uncordon or untaint them, or narrow "
                     f"gpuClasses.{g.gpu_class}.nodeSelector to the nodes that take pods")
    others = reasons.replace(f"Insufficient {rdma}", "") if rdma is not None else reasons
    if "Insufficient" in others or "Too many pods" in others:
        fewer = f" or fewer GPUs each (workers.{g.name}.tensorParallel)" if g.tensor_parallel > 1 else ""
        gpu_short = f"Insufficient {cls.resource}" in reasons
        more = (" or more time-slicing replicas per GPU from the device plugin"
                if cls.sharing == "timeSliced" and gpu_short else "")
        fixes.append(f"run fewer replicas (workers.{g.name}.replicas){fewer}, or add nodes to "
                     f"gpuClasses.{g.gpu_class} (it plans nodes: {cls.nodes}, gpusPerNode: {cls.gpus_per_node}){more}")
    if packing.UNSCHEDULABLE in reasons or packing.TAINTED in reasons:
        fixes.append("make the class's cordoned or tainted nodes schedulable (kubectl uncordon NODE)")
    fixes = [f[0].lower() + f[1:] for f in fixes]
    text = "; or ".join(fixes) or f"change gpuClasses.{g.gpu_class}.nodeSelector to match nodes with room"
    return text[0].upper() + text[1:]


def nodes_and_classes(stack: ResolvedStack, sizing: StackSizing, data: ClusterData, work: list[PodGroup],
                      report: Report) -> None:
    cfg = stack.config
    class_nodes = classes.place(cfg, sizing, data, report)
    workers = [w for w in work if w.kind == "worker" and w.gpu_class in class_nodes]
    # Jobs of a class with no node: its class's problem says why.
    others = [w for w in work if w.kind != "worker" and (w.gpu_class is None or w.gpu_class in class_nodes)]
    bound, floating = _bind(others, data, report)
    booked = {n.name: _totals(bound[n.name])[0] for n in data.nodes}
    place = _Placement.of(packing.pack(data.nodes, workers, booked), data.nodes)
    packed = place.packed
    report.pending = [PendingPod(p.name, p.group.name, place.owner.get(p.name), packed.pending[p.name])
                      for p in packed.order if p.name in packed.pending]
    class_on = {node.name: name for name, nodes in class_nodes.items() for node in nodes}
    rows = {node.name: place.on(node.name, workers) + bound[node.name] for node in data.nodes}
    bound_totals = {name: _totals(mine)[0] for name, mine in rows.items()}
    covered: set[str] = set()  # nodes whose own problem explains the Pending pods that have only them
    over: dict[str, list[Problem]] = defaultdict(list)  # per class, its nodes whose GPUs carry more than planned
    for node in data.nodes:
        mine = sorted(rows[node.name], key=lambda w: [x.name for x in work].index(w.name))
        extra = [w for w, candidates in floating if any(c.name == node.name for c in candidates)]
        pods_here = [p.name for p in packed.placed.get(node.name, [])]
        if not mine:
            report.nodes.append(NodeRow(node.name, [Placed(w.name, w.replicas, False) for w in extra], [], None, True,
                                        pods_here))
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
        gpu_class = class_on.get(node.name)
        for resource in sorted(total, key=lambda r: (r in ("memory", "cpu"), r != "memory", r)):
            has = node.allocatable.get(resource, Fraction(0))
            ok = total[resource] <= has
            needs.append(Need(resource, total[resource], has, ok))
            if not ok:
                report.problems.append(short(node, resource, total[resource], has, bound_totals[node.name][resource],
                                             parts[resource], mine, gpu_class, stack, place.waiting(node.name)))
        if len(report.problems) > problems_before:
            covered.add(node.name)
        gpu = None
        if gpu_class is not None and any(w.kind == "worker" for w in mine):
            resource = cfg.gpu_classes[gpu_class].resource
            ours = [w for w in mine if w.kind == "worker" and w.gpu_class == gpu_class and resource in w.requests]
            as_planned = gpus.class_on_node(
                stack, gpu_class, node, sum((w.replicas * w.requests[resource] for w in ours), Fraction(0)),
                [f"{w.replicas} x {w.name}, {fmt(resource, w.requests[resource])} each" for w in ours],
                total[resource] > node.allocatable.get(resource, Fraction(0)), report)
            gpu = _gpu_memory(cfg, sizing, node, gpu_class, report, place.workers_here(node.name, stack, gpu_class))
            fits = next((g for g in sizing.gpus if g.gpu_class == gpu_class), None)
            # A node whose GPUs are not the class's says so in its own problem, not again as memory.
            if as_planned and gpu is not None and fits is not None and gpu.sharing > fits.sharing:
                over[gpu_class].append(gpus.over_shared(stack, node, gpu_class, fits, gpu))
        places = [Placed(w.name, w.replicas, True) for w in mine] + [Placed(w.name, w.replicas, False) for w in extra]
        report.nodes.append(NodeRow(node.name, places, needs, gpu, len(report.problems) == problems_before, pods_here,
                                    place.waiting(node.name)))
    uncovered = [p for p in packed.order if p.name in packed.pending and place.owner.get(p.name) not in covered]
    for name, nodes in class_nodes.items():
        stuck = [p for p in uncovered if p.group.gpu_class == name]
        words = ([_pending_words(stuck, packed)] if stuck else []) + [o.problem for o in over[name]]
        if classes.node_count(stack, name, nodes, words, report):
            report.problems.extend(over[name])
            _pending_problems(stack, stuck, packed, data.nodes, report)
        shared = {o.where for o in over[name]}
        report.nodes[:] = [dataclasses.replace(r, ok=False) if f"node {r.name}" in shared else r for r in report.nodes]
    _floating_room(floating, bound_totals, report)


def _pending_problems(stack: ResolvedStack, stuck: list[packing.GroupPod], packed: packing.Packing,
                      nodes: list[Node], report: Report) -> None:
    """Pending worker pods no node's own problem explains, one problem per group, in the scheduler's
    words."""
    by_group: dict[str, list[packing.GroupPod]] = defaultdict(list)
    for p in stuck:
        by_group[p.group.name].append(p)
    for name, pods in by_group.items():
        reasons = " ".join(packed.pending[p.name] for p in pods)
        report.problems.append(Problem(f"workers.{name}", "schedulable", _pending_words(pods, packed),
                                       _pending_fix(stack, pods[0].group, reasons, nodes)))


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
