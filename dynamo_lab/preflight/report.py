"""The preflight's answer as data: per GPU class and node, needs against has, the cluster-wide
checks, and each problem with its fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any, Optional


@dataclass(frozen=True)
class Problem:
    where: str  # "node gpu-laptop", "gpuClasses.gpu-8gb", "platform", "graph.namespace", ...
    check: str  # "gpu units", "gpu memory", "memory", "cpu", "node selector", "kubernetes version", ...
    problem: str
    fix: str


@dataclass(frozen=True)
class ClassRow:
    gpu_class: str
    selector: str
    workers: int
    nodes: list[str]  # the nodes its selector matches
    ok: bool
    planned_nodes: int = 1  # gpuClasses.<name>.nodes, what the sizing planned for


@dataclass(frozen=True)
class Need:
    """One resource on one node: what the stack's pods there request, and what the node has."""

    resource: str
    needs: Fraction
    has: Fraction
    ok: bool


@dataclass(frozen=True)
class GpuMemory:
    gpu_class: str
    planned_bytes: int  # the sizing's plan for the workers sharing the GPU
    reported_mib: Optional[int]  # the node's nvidia.com/gpu.memory label; None: missing
    budget_bytes: Optional[int]  # reported less the class's reserve
    ok: bool
    workers: int = 0  # the class's workers the packing puts on this node
    sharing: int = 0  # the most of them that may share one of its GPUs
    planned_sharing: int = 0  # the most the sizing planned one GPU for (GpuFit.sharing)


@dataclass(frozen=True)
class Placed:
    name: str  # a worker group, "frontend", "probe target Job", ...
    replicas: int
    bound: bool  # False: it has no node of its own and may land here (counted all the same)


@dataclass(frozen=True)
class NodeRow:
    name: str
    places: list[Placed]
    resources: list[Need]  # empty: nothing of this stack is bound to the node
    gpu_memory: Optional[GpuMemory]
    ok: bool
    pods: list[str] = field(default_factory=list)  # the worker pods the packing places here ("decode-0")
    # Worker pods counted here (in places and needs) that stay Pending: this is the one node they may use.
    pending: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PendingPod:
    """A worker pod the packing leaves Pending (packing.py), with the scheduler's message."""

    pod: str
    group: str
    node: Optional[str]  # the one node its node affinity allows, whose problem says why; None: several
    reason: str


@dataclass(frozen=True)
class Check:
    name: str
    ok: Optional[bool]  # None: preflight could not check it (the detail says why); not a problem
    detail: str


@dataclass
class Report:
    stack: str
    source: str
    server_version: str
    classes: list[ClassRow] = field(default_factory=list)
    nodes: list[NodeRow] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pending: list[PendingPod] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            if isinstance(value, Fraction):
                return int(value) if value.denominator == 1 else float(value)
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, list):
                return [plain(v) for v in value]
            return value

        return {"fits": self.fits, **plain(asdict(self))}

