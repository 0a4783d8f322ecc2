"""The layouts `advise` looks at, from the GPU classes a cluster has nodes for.

Three kinds of layout, in the families FAMILIES names (docs/advise.md's table lists them): one
of aggregated workers with KV routing on any mix of classes; one per class, of prefill and decode
workers on that class's node; one per ordered pair of classes, of prefill on the first and decode
on the second. Replicas per class run from 1 (0 for a mixed aggregated layout) to the GPU
units the class's node advertises (time-sliced replicas: one per worker), at most
MAX_REPLICAS_PER_CLASS. KV pools, memory requests and limits are left to the sizing, as a stack
file that does not set them gets them: the class's GPU budget shared evenly, and the host memory
floor as request and limit.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from infra.config.models import StackConfig
from infra.lab.preflight import classes, selectors
from infra.lab.preflight.cluster_data import ClusterData, Node
from infra.lab.preflight.fit import blocked

# The search's bound, for its time: a node may advertise more GPU units, but on a 24GB-class card
# (21.6 GiB after its reserve) a seventh worker leaves each under 0.5 GiB of KV pool once its 1.1 GiB
# of weights and 1.5 GiB of CUDA overhead are counted (docs/advise.md).
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
            return " + ".join(f"{g.replicas} agg on {g.gpu_class}" for g in self.groups)
        prefill = next(g for g in self.groups if g.role == "prefill")
        decode = next(g for g in self.groups if g.role == "decode")
        if self.kind == ONE_NODE:
            return f"{prefill.replicas} prefill + {decode.replicas} decode on {prefill.gpu_class}"
        return f"{prefill.replicas} prefill on {prefill.gpu_class} -> {decode.replicas} decode on {decode.gpu_class}"

    def workers(self) -> list[dict]:
        """The `dynamo-lab:workers` value, as a stack file spells it."""
        return [{"name": g.name, "role": g.role, "replicas": g.replicas, "gpuClass": g.gpu_class}
                for g in self.groups]


@dataclass(frozen=True)
class ClassNode:
    gpu_class: str
    node: str
    units: int  # GPU units the node advertises for the class's resource
    searched: int  # the replicas the search tries at most: min(units, MAX_REPLICAS_PER_CLASS)


def class_nodes(cfg: StackConfig, data: ClusterData) -> tuple[list[ClassNode], list[str]]:
    """Each GPU class of the stack that selects exactly one schedulable node advertising its GPU
    resource, and why each other class is left out (preflight's own rules: classes.py)."""
    found, left_out = [], []
    taken: dict[str, str] = {}
    for name, cls in cfg.gpu_classes.items():
        nodes: list[Node] = [n for n in data.nodes
                             if selectors.term_matches(classes.class_expressions(cls), n.labels)]
        if len(nodes) != 1:
            left_out.append(f"{name}: its nodeSelector matches {len(nodes)} nodes (preflight needs exactly one)")
            continue
        node = nodes[0]
        units = node.allocatable.get(cls.resource)
        if blocked(node):
            left_out.append(f"{name}: node {node.name} is {blocked(node)}")
        elif not units or units < 1:
            left_out.append(f"{name}: node {node.name} advertises no {cls.resource}")
        elif node.name in taken:
            left_out.append(f"{name}: node {node.name} is {taken[node.name]}'s already (one class per node)")
        else:
            taken[node.name] = name
            n = math.floor(units)
            found.append(ClassNode(name, node.name, n, min(n, MAX_REPLICAS_PER_CLASS)))
    return found, left_out


def _short(gpu_class: str) -> str:
    """A group name part for a class: gpu-24gb -> 24gb, as the shipped stacks name theirs."""
    return gpu_class.removeprefix("gpu-") or gpu_class


def layouts(nodes: list[ClassNode]) -> list[Layout]:
    """Every layout of the families (FAMILIES) within the bound, in a fixed order."""
    out: list[Layout] = []
    ranges = [range(0, n.searched + 1) for n in nodes]
    for counts in itertools.product(*ranges):
        if sum(counts):
            out.append(Layout(AGGREGATED, tuple(Group(f"worker-{_short(n.gpu_class)}", "agg", n.gpu_class, k)
                                                for n, k in zip(nodes, counts, strict=True) if k)))
    for n in nodes:
        for p in range(1, n.searched):
            for d in range(1, n.searched - p + 1):
                out.append(Layout(ONE_NODE, (Group("prefill", "prefill", n.gpu_class, p),
                                             Group("decode", "decode", n.gpu_class, d))))
    for a, b in itertools.permutations(nodes, 2):
        for p in range(1, a.searched + 1):
            for d in range(1, b.searched + 1):
                out.append(Layout(ACROSS, (Group("prefill", "prefill", a.gpu_class, p),
                                           Group("decode", "decode", b.gpu_class, d))))
    return out
