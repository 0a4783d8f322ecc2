"""The layouts `advise` looks at, from the GPU classes a cluster has nodes for.

Three kinds of layout, in the families FAMILIES names (docs/advise.md's table lists them): one
of aggregated workers with KV routing on any mix of classes; one per class, of prefill and decode
workers on that class's nodes; one per ordered pair of classes, of prefill on the first and decode
on the second. A class is every schedulable node its nodeSelector matches that advertises its GPU
resource, all alike (ClassNode); a class's nodes are interchangeable, so a layout is a count of
workers per class, not per node, and a class of several nodes spreads each group `even` over
them (a topology spread constraint: the same count on each node, give or take one), which fixes
where the scheduler puts them up to which node is which (docs/advise.md, "What it searches").
On a class of whole GPUs each group may also run tensorParallel t, for each t that divides the
model's attention and KV heads and fits a node's GPUs, and a prefill group and a decode group each
their own t where vLLM 0.31.0's NixlConnector pairs them (one divides the other: infra/kv_ranks.py),
in the counts of each that take whole nodes' worth of a class's GPUs (_fills). Replicas per
class run from 1 (0 for a mixed aggregated layout) to what its nodes hold: per node, the GPU units it advertises
(time-sliced: one per worker, at most MAX_REPLICAS_PER_CLASS) or its GPUs over t (whole); and no
layout has more workers than `max_workers` (the traffic's requests in flight: search.py). KV
pools, memory requests and limits are left to the sizing, as a stack file that does not set them
gets them: the class's GPU budget shared evenly, and the host memory floor as request and limit.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Optional

from dynamo_lab.preflight import classes, selectors
from dynamo_lab.preflight.cluster_data import ClusterData, Node
from dynamo_lab.preflight.fit import blocked
from dynamo_lab.preflight.gpus import GPU_COUNT_LABEL, NodeGpus
from infra import kv_ranks
from infra.config.schema import StackConfig
from infra.validate.topology import tensor_parallel_sizes

# The search's bound per node of a time-sliced class, for its time: a node may advertise more GPU
# units, but on a 24GB-class card (21.6 GiB after its reserve) a seventh worker leaves each under
# 0.5 GiB of KV pool once its 1.1 GiB of weights and 1.5 GiB of CUDA overhead are counted
# (docs/advise.md).
MAX_REPLICAS_PER_CLASS = 6
AGGREGATED = "aggregated"
ONE_NODE = "one-node"
ACROSS = "across"

# The families, the one definition: each kind's family name, `{a}` and `{b}` standing for GPU
# classes. A name with `{a}` is one family per class, with `{b}` too one per ordered pair of
# classes; the output has a line per family (text.py), and docs/advise.md's table a row per kind
# with A and B for the classes (tests/lab/advise compares the table with what layouts() makes).
FAMILIES = {
    AGGREGATED: "aggregated, KV routing",
    ONE_NODE: "prefill/decode on {a}'s node",
    ACROSS: "prefill on {a} -> decode on {b}",
}


@dataclass(frozen=True)
class Group:
    name: str
    role: str
    gpu_class: str
    replicas: int
    tensor_parallel: int = 1
    spread: str = "none"  # "even" on a class of several nodes

    @property
    def tp(self) -> str:
        return f" (TP {self.tensor_parallel})" if self.tensor_parallel != 1 else ""


@dataclass(frozen=True)
class Layout:
    kind: str  # AGGREGATED | ONE_NODE | ACROSS
    groups: tuple[Group, ...]

    @property
    def family(self) -> str:
        """The family this layout belongs to, in words: each family's best is kept or dropped."""
        if self.kind == AGGREGATED:
            return FAMILIES[AGGREGATED]
        prefill = next(g for g in self.groups if g.role == "prefill")
        decode = next(g for g in self.groups if g.role == "decode")
        return FAMILIES[self.kind].format(a=prefill.gpu_class, b=decode.gpu_class)

    @property
    def label(self) -> str:
        if self.kind == AGGREGATED:
            return " + ".join(f"{g.replicas} agg{g.tp} on {g.gpu_class}" for g in self.groups)
        prefill = next(g for g in self.groups if g.role == "prefill")
        decode = next(g for g in self.groups if g.role == "decode")
        if prefill.tensor_parallel != decode.tensor_parallel:  # each role its own size
            where = (f" on {prefill.gpu_class}", "") if self.kind == ONE_NODE else ("", f" on {decode.gpu_class}")
            joint = " + " if self.kind == ONE_NODE else f" on {prefill.gpu_class} -> "
            return (f"{prefill.replicas} prefill (TP {prefill.tensor_parallel}){joint}{decode.replicas} decode "
                    f"(TP {decode.tensor_parallel}){where[0]}{where[1]}")
        if self.kind == ONE_NODE:
            return f"{prefill.replicas} prefill + {decode.replicas} decode on {prefill.gpu_class}{prefill.tp}"
        return (f"{prefill.replicas} prefill on {prefill.gpu_class} -> {decode.replicas} decode on "
                f"{decode.gpu_class}{prefill.tp}")

    @property
    def workers_count(self) -> int:
        return sum(g.replicas for g in self.groups)

    def workers(self) -> list[dict]:
        """The `dynamo-lab:workers` value, as a stack file spells it (the lab's keys only, unless set)."""
        out = []
        for g in self.groups:
            w = {"name": g.name, "role": g.role, "replicas": g.replicas, "gpuClass": g.gpu_class}
            if g.tensor_parallel != 1:
                w["tensorParallel"] = g.tensor_parallel
            if g.spread != "none":
                w["spread"] = g.spread
            out.append(w)
        return out


@dataclass(frozen=True)
class ClassNode:
    """A GPU class as the cluster has it: its nodes (alike, interchangeable) and what each offers."""

    gpu_class: str
    node: str  # its nodes' names, comma-separated (one for the lab's classes)
    units: int  # GPU units each node advertises for the class's resource
    searched: int  # workers of tensorParallel 1 the search puts on one node at most
    nodes: int = 1
    gpus_per_node: int = 1
    sharing: str = "timeSliced"  # "whole": each unit is a GPU a worker owns
    tensor_parallel: tuple[int, ...] = (1,)  # the sizes the search tries (whole GPUs only above 1)

    def per_node(self, tp: int) -> int:
        """Workers of tensorParallel `tp` one node holds."""
        return self.searched if tp == 1 else self.gpus_per_node // tp

    def settings(self) -> dict:
        """The class's keys as the cluster has them (what a candidate stack file writes)."""
        out = {"nodes": self.nodes, "gpusPerNode": self.gpus_per_node, "sharing": self.sharing}
        if self.sharing == "timeSliced" and self.gpus_per_node > 1:
            out["slicesPerGpu"] = max(1, self.units // self.gpus_per_node)
        return out


def _gpus(node: Node, resource: str, default: int) -> int:
    """Physical GPUs on a node as preflight reads them (GPU feature discovery's count, or the units
    over the replicas label; a count below one is none: preflight.gpus.NodeGpus), else the stack's
    gpusPerNode."""
    return NodeGpus.of(node, resource).count or default


def class_nodes(cfg: StackConfig, data: ClusterData) -> tuple[list[ClassNode], list[str]]:
    """Each GPU class of the stack with schedulable nodes advertising its GPU resource, all alike,
    and why each other class is left out (preflight's own selector rules: classes.py). A class's
    nodes must be alike (GPU units, GPU count and memory labels): the sizing plans each node of a
    class the same; time-sliced where a node advertises more units than it has GPUs."""
    found, left_out = [], []
    taken: dict[str, str] = {}
    for name, cls in cfg.gpu_classes.items():
        matched: list[Node] = [n for n in data.nodes
                               if selectors.term_matches(classes.class_expressions(cls), n.labels)]
        if not matched:
            left_out.append(f"{name}: its nodeSelector matches no node")
            continue
        usable = [n for n in matched if not blocked(n) and (n.allocatable.get(cls.resource) or 0) >= 1]
        if not usable:
            node = matched[0]
            why = blocked(node) or f"advertises no {cls.resource}"
            left_out.append(f"{name}: node {node.name} is {why}" if blocked(node) else
                            f"{name}: node {node.name} {why}")
            continue
        mine = [n for n in usable if n.name in taken]
        if mine:
            left_out.append(f"{name}: node {mine[0].name} is {taken[mine[0].name]}'s already (one class per node)")
            continue
        kinds = {(math.floor(n.allocatable[cls.resource]), _gpus(n, cls.resource, cls.gpus_per_node),
                  n.labels.get("nvidia.com/gpu.memory")) for n in usable}
        if len(kinds) > 1:
            left_out.append(f"{name}: its nodes differ ({', '.join(n.name for n in usable)}: GPU units, "
                            f"{GPU_COUNT_LABEL} or nvidia.com/gpu.memory), and the sizing plans a class's nodes "
                            "alike: give each kind of node its own class")
            continue
        units, gpus, _ = kinds.pop()
        for n in usable:
            taken[n.name] = name
        # More units than GPUs: the device plugin advertises time-sliced replicas. As many units as
        # GPUs, several: each is a GPU a worker owns. One unit of one GPU: one worker either way, as the
        # stack says (the lab's classes stay the lab's).
        sharing = "timeSliced" if units > gpus else "whole" if gpus > 1 else cls.sharing
        per_node = min(units, MAX_REPLICAS_PER_CLASS) if sharing == "timeSliced" else units
        tps = tuple(tensor_parallel_sizes(cfg.model, gpus)) if sharing == "whole" else (1,)
        found.append(ClassNode(name, ", ".join(n.name for n in usable), units, per_node, len(usable), gpus,
                               sharing, tps))
    return found, left_out


def _short(gpu_class: str) -> str:
    """A group name part for a class: gpu-24gb -> 24gb, as the shipped stacks name theirs."""
    return gpu_class.removeprefix("gpu-") or gpu_class


def _fills(n: ClassNode, *groups: tuple[int, int]) -> bool:
    """Whether groups of (tensorParallel, replicas) take whole nodes' worth of a class's GPUs (8 or 16
    of two 8-GPU nodes), at most all of them.

    The layouts whose prefill and decode groups run different sizes are searched in these counts
    alone: the splits of a node count's GPUs between the roles, as layouts of one size are compared
    at equal GPUs. A bound for the search's time: each layout is a simulated screening, and on two
    8-GPU nodes every count of each role would add about as many again as the 185 of one size (a
    search past a minute on 2 cores); these add 42, of which the placement decision takes 20
    (docs/advise.md)."""
    gpus = sum(c * tp for tp, c in groups)
    # Counts only: whether the pods land on the nodes (each group spread even, in whichever order the
    # operator creates them) is the placement decision's, which the sizing of each candidate asks.
    return gpus % n.gpus_per_node == 0 and gpus <= n.gpus_per_node * n.nodes


def _mixed(a: ClassNode, b: ClassNode) -> list[tuple[int, int]]:
    """(prefill size, decode size), two different sizes its classes offer that vLLM 0.31.0's
    NixlConnector pairs (infra/kv_ranks.py: one divides the other). Every size a class offers divides
    the model's KV heads (class_nodes), so none replicates a head: the rule is asked with a KV head
    count both sizes divide, which is all it reads of the model."""
    return [(p, d) for p in a.tensor_parallel for d in b.tensor_parallel
            if p != d and kv_ranks.refusal(p, d, math.lcm(p, d)) is None]


def _spread(n: ClassNode) -> str:
    return "even" if n.nodes > 1 else "none"


def _options(n: ClassNode) -> list[tuple[int, int]]:
    """A class's aggregated groups: (tensorParallel, replicas), or (1, 0) for none."""
    return [(1, 0)] + [(t, r) for t in n.tensor_parallel for r in range(1, n.per_node(t) * n.nodes + 1)]


def layouts(nodes: list[ClassNode], max_workers: Optional[int] = None) -> list[Layout]:
    """Every layout of the families (FAMILIES) within the bounds, in a fixed order; none with more
    than `max_workers` workers."""
    out: list[Layout] = []
    cap = max_workers or math.inf

    def add(layout: Layout) -> None:
        if layout.workers_count <= cap:
            out.append(layout)

    for choice in itertools.product(*(_options(n) for n in nodes)):
        if sum(r for _, r in choice):
            add(Layout(AGGREGATED, tuple(Group(f"worker-{_short(n.gpu_class)}", "agg", n.gpu_class, r, t, _spread(n))
                                         for n, (t, r) in zip(nodes, choice, strict=True) if r)))
    for n in nodes:
        for t in n.tensor_parallel:
            most = n.per_node(t) * n.nodes
            # Every count the class's GPUs (or slices) could hold; which of them the nodes take is the
            # placement decision's, through the sizing of each candidate (a pod left Pending is refused).
            for p in range(1, most):
                for d in range(1, most - p + 1):
                    add(Layout(ONE_NODE, (Group("prefill", "prefill", n.gpu_class, p, t, _spread(n)),
                                          Group("decode", "decode", n.gpu_class, d, t, _spread(n)))))
    for n in nodes:
        # Each role its own size where the connector pairs them (several TP 1 prefill workers into one
        # TP 4 decode worker, ...), after the layouts of one size (whose order they keep): the splits of
        # whole nodes' worth of the class's GPUs between the two (_fills).
        for tp, td in _mixed(n, n):
            for p in range(1, n.per_node(tp) * n.nodes + 1):
                for d in range(1, n.per_node(td) * n.nodes + 1):
                    if _fills(n, (tp, p), (td, d)):
                        add(Layout(ONE_NODE, (Group("prefill", "prefill", n.gpu_class, p, tp, _spread(n)),
                                              Group("decode", "decode", n.gpu_class, d, td, _spread(n)))))
    for a, b in itertools.permutations(nodes, 2):
        for t in (t for t in a.tensor_parallel if t in b.tensor_parallel):
            for p in range(1, a.per_node(t) * a.nodes + 1):
                for d in range(1, b.per_node(t) * b.nodes + 1):
                    add(Layout(ACROSS, (Group("prefill", "prefill", a.gpu_class, p, t, _spread(a)),
                                        Group("decode", "decode", b.gpu_class, d, t, _spread(b)))))
        # Each its own size, in whole nodes' worth of each class's GPUs (_fills).
        for tp, td in _mixed(a, b):
            for p in (p for p in range(1, a.per_node(tp) * a.nodes + 1) if _fills(a, (tp, p))):
                for d in (d for d in range(1, b.per_node(td) * b.nodes + 1) if _fills(b, (td, d))):
                    add(Layout(ACROSS, (Group("prefill", "prefill", a.gpu_class, p, tp, _spread(a)),
                                        Group("decode", "decode", b.gpu_class, d, td, _spread(b)))))
    return out
