"""Where a stack's workers may land and where they are expected to: the one placement model.

Every replica of a worker group runs on a node of its GPU class (the class's node affinity). How
many of a group one node may get is the group's `spread`'s (`none`: all of them, the scheduler may
pack them; `even`: a topology spread constraint of maxSkew 1 per node, so ceil(replicas / nodes);
`onePerNode`: required pod anti-affinity, one). On a `whole` class each worker owns its
`tensorParallel` GPUs, so no two share one; on a time-sliced class every worker one node may run
shares its GPUs, at most the device plugin's `slicesPerGpu` on one.

Where each replica is expected to land (`Placement.replicas`) is where kube-scheduler's default
scoring would put it, in the stack's order: of the nodes its group's spread allows, the one with
the fewest workers so far, the lowest first (NodeResourcesFit's LeastAllocated: with identical
nodes, the fewest workers), and on whole GPUs one with `tensorParallel` GPUs free; its GPUs are the
next free ones (whole) or the node's GPUs in turn (time-sliced). Preflight packs the same pods
against the cluster as it is (dynamo_lab/preflight/packing.py), and the cluster tier holds that
packing to the real kube-scheduler.

Read by the resolved stack (infra/resolved.py, `ResolvedStack.placement`), and through it by the
sizing (workers sharing one GPU, whole GPUs per node, the KV path a pair takes), preflight, the
predictor (each replica's node and GPUs, the node pairs KV crosses between) and advise. None of
them works placement out again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from infra.config.stack import StackConfig
from infra.config.workers import WorkerGroup

KvPath = Literal["same-node", "cross-node"]


@dataclass(frozen=True)
class Replica:
    """One worker (a replica of a group) where it is expected to land."""

    group: WorkerGroup
    index: int  # its replica number within the group
    node: int  # which of its class's nodes, from 0
    gpus: tuple[int, ...]  # the GPUs of that node it runs on: its own (whole), or the one it time-shares

    @property
    def name(self) -> str:
        return f"{self.group.name}-{self.index}"

    @property
    def gpu_class(self) -> str:
        return self.group.gpu_class


def running(cfg: StackConfig) -> tuple[WorkerGroup, ...]:
    """The groups that start workers (replicas > 0), in the file's order."""
    return tuple(g for g in cfg.workers if g.replicas > 0)


@dataclass(frozen=True)
class Placement:
    """The placement of one stack's running groups (`active`: replicas > 0, in the file's order)."""

    config: StackConfig
    active: tuple[WorkerGroup, ...]

    @classmethod
    def of(cls, cfg: StackConfig) -> "Placement":
        """The placement of a stack file's running groups: what `ResolvedStack.placement` holds, for
        the readers handed the config alone (the predictor's cells, which run in worker processes)."""
        return cls(cfg, running(cfg))

    def active_on(self, gpu_class: str) -> tuple[WorkerGroup, ...]:
        """The groups that start workers on one GPU class."""
        return tuple(g for g in self.active if g.gpu_class == gpu_class)

    def gpus_per_pod(self, group: WorkerGroup) -> int:
        """The GPUs one worker pod of `group` takes on its node: one per tensor-parallel rank (on a
        time-sliced class, where tensorParallel is 1, one time-sliced unit)."""
        return group.tensor_parallel

    def devices(self, group: WorkerGroup) -> dict[str, int]:
        """The extended resources one worker pod of `group` requests of its node: its GPUs
        (`gpus_per_pod`, as the class's GPU resource), and one RDMA device where its KV moves over
        RDMA (the class's rdmaResource; infra.validate requires it)."""
        cls = self.config.gpu_classes[group.gpu_class]
        devices = {cls.resource: self.gpus_per_pod(group)}
        if group.rdma and cls.rdma_resource is not None:
            devices[cls.rdma_resource] = 1
        return devices

    def gpus_needed(self, gpu_class: str) -> int:
        """The GPUs (or time-sliced units) the running workers of one class take in all."""
        return sum(g.replicas * self.gpus_per_pod(g) for g in self.active_on(gpu_class))

    def workers_on(self, gpu_class: str) -> int:
        """The workers (replicas) of one GPU class, over all its nodes."""
        return sum(g.replicas for g in self.active_on(gpu_class))

    def most_per_node(self, group: WorkerGroup) -> int:
        """The most replicas of `group` one node of its class may get (this module's docstring)."""
        nodes = self.config.gpu_classes[group.gpu_class].nodes
        if group.spread == "onePerNode":
            return min(group.replicas, 1)
        if group.spread == "even":
            return math.ceil(group.replicas / nodes)
        return group.replicas

    def workers_per_node(self, gpu_class: str) -> int:
        """The most workers of any group one node of `gpu_class` may run at once, at worst."""
        return sum(self.most_per_node(g) for g in self.active_on(gpu_class))

    def sharing_one_gpu(self, gpu_class: str) -> int:
        """The most workers that may share one GPU of `gpu_class`: one on a `whole` class (each worker
        owns its GPUs), else every worker one node may run, at most the device plugin's slices per GPU."""
        cls = self.config.gpu_classes[gpu_class]
        here = self.workers_per_node(gpu_class)
        if cls.sharing == "whole":
            return min(here, 1)
        return here if cls.slices_per_gpu is None else min(here, cls.slices_per_gpu)

    def kv_path(self, prefill: WorkerGroup, decode: WorkerGroup) -> KvPath:
        """`same-node` where a prefill and a decode group can only meet on one node (one class of one
        node), else `cross-node`: two classes, or one class of several nodes, where at worst the pair
        is on two (the sizing takes the slower path)."""
        cls = self.config.gpu_classes[prefill.gpu_class]
        return "same-node" if prefill.gpu_class == decode.gpu_class and cls.nodes == 1 else "cross-node"

    def whole_gpus_fit(self, gpu_class: str) -> bool:
        """Whether a `whole` class's nodes hold its workers' GPUs at all: each pod needs its
        tensorParallel GPUs on one node; packed first-fit, largest first, as many as the nodes hold."""
        cls = self.config.gpu_classes[gpu_class]
        free = [cls.gpus_per_node] * cls.nodes
        for need in sorted((self.gpus_per_pod(g) for g in self.active_on(gpu_class) for _ in range(g.replicas)),
                           reverse=True):
            node = next((i for i, left in enumerate(free) if left >= need), None)
            if node is None:
                return False
            free[node] -= need
        return True

    @cached_property
    def replicas(self) -> tuple[Replica, ...]:
        """Every replica where it is expected to land, in the stack's order (this module's docstring);
        worked out once."""
        out = []
        placed: dict[str, list[int]] = {}  # class -> workers per node
        owned: dict[str, list[int]] = {}  # class -> whole GPUs taken per node
        for g in self.active:
            cls = self.config.gpu_classes[g.gpu_class]
            n, per_node = cls.nodes, cls.gpus_per_node
            on_node = placed.setdefault(g.gpu_class, [0] * n)
            taken = owned.setdefault(g.gpu_class, [0] * n)
            mine = [0] * n
            gpus_each = self.gpus_per_pod(g)
            for i in range(g.replicas):
                allowed = [k for k in range(n) if _spread_allows(g.spread, mine, k)
                           and (cls.sharing != "whole" or taken[k] + gpus_each <= per_node)]
                k = min(allowed or range(n), key=lambda k: (on_node[k], k))
                if cls.sharing == "whole":
                    gpus = tuple(range(taken[k], taken[k] + gpus_each))
                    taken[k] += gpus_each
                else:
                    gpus = (on_node[k] % per_node,)
                on_node[k] += 1
                mine[k] += 1
                out.append(Replica(g, i, k, gpus))
        return tuple(out)

    def node_pairs(self, from_group: str, to_group: str) -> list[tuple[tuple[str, int], tuple[str, int]]]:
        """The (class, node) pairs a transfer from one group's replicas to another's crosses, each
        once, sorted."""
        def nodes(group: str) -> set[tuple[str, int]]:
            return {(r.gpu_class, r.node) for r in self.replicas if r.group.name == group}
        return [(p, d) for p in sorted(nodes(from_group)) for d in sorted(nodes(to_group))]


def _spread_allows(spread: str, mine: list[int], k: int) -> bool:
    """Whether a group's spread lets one more of its replicas onto node `k` (`mine`: its per node)."""
    if spread == "onePerNode":
        return mine[k] == 0
    if spread == "even":
        return mine[k] + 1 - min(mine) <= 1
    return True
