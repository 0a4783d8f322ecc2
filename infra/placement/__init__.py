"""Where a stack's workers may land and where they are expected to: the one placement model.

Two modules: this one, the stack's view (what its settings bound, and the nodes it plans), and
decide.py, the decision itself (which host each pod lands on, or why none), which this module feeds
with the stack's nominal nodes and preflight (dynamo_lab/preflight/packing.py) with a cluster's.

Every replica of a worker group runs on a node of its GPU class (the class's node affinity). How
many of a group one node may get is the group's `spread`'s (`none`: all of them, the scheduler may
pack them; `even`: a topology spread constraint of maxSkew 1 per node, so ceil(replicas / nodes);
`onePerNode`: required pod anti-affinity, one). On a `whole` class each worker owns its
`tensorParallel` GPUs, so no two share one; on a time-sliced class every worker one node may run
shares its GPUs, at most the device plugin's `slicesPerGpu` on one.

Where each replica is expected to land (`Placement.replicas`) is the decision (decide.py) on the
class's nominal nodes: identical, each with `gpusPerNode` GPUs (whole) or `slicesPerGpu` units a
GPU (time-sliced, where given), each replica's pod asking its GPUs of them. So of the nodes its
group's spread allows and whose GPUs it fits, the one with the fewest workers so far, the first of
equals, larger GPU asks first and the stack's order among equals. Its GPUs are the next free ones
(whole) or the node's GPUs in turn (time-sliced): the device plugin's choice, which the scheduler
does not make. Preflight places the same pods by the same decision on the cluster as it is, and
the cluster tier holds that to the real kube-scheduler.

Read by the resolved stack (infra/resolved.py, `ResolvedStack.placement`), and through it by the
sizing (workers sharing one GPU, whether a whole class's nodes hold its pods, the KV path a pair
takes), preflight, the predictor (each replica's node and GPUs) and advise. None of them works
placement out again. A new placement fact (per-role TP, a same-node KV path, per-role placement)
extends `Placement` or the decision's inputs, and says here what it answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Literal

from infra.config.stack import StackConfig
from infra.config.workers import WorkerGroup
from infra.placement.decide import Decision, Host, Pod, place

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
        """Whether a `whole` class's nominal nodes hold its workers' pods: each pod needs its
        tensorParallel GPUs on one node, placed as the decision places them, spread and all, in the
        order the decision takes them and, where they ask different GPUs, smaller first too (the
        operator creates each group's pods in no fixed order: decide.py's docstring)."""
        return not self.unplaced(gpu_class) and not self.unplaced_smaller_first(gpu_class)

    def unplaced(self, gpu_class: str) -> list[str]:
        """The pods of one class that no nominal node takes (the decision's pending), by name."""
        return [p for p in self.decision.pending if self._pods[p].gpu_class == gpu_class]

    def unplaced_smaller_first(self, gpu_class: str) -> list[str]:
        """The pods of one class that no nominal node takes where the smaller pods reach the scheduler
        first; none where the class's pods all ask the same GPUs (then the order changes nothing)."""
        if len({self.gpus_per_pod(g) for g in self.active_on(gpu_class)}) < 2:
            return []
        return [p for p in self._smaller_first.pending if self._pods[p].gpu_class == gpu_class]

    def node_name(self, gpu_class: str, k: int) -> str:
        """The words for node `k` (from 0) of a class's planned nodes: the class's own name where it
        has one node (the lab's), else "<class> node <k+1> of <n>". A planned node, not a real one:
        which real node it is, the scheduler decides (preflight names them)."""
        nodes = self.config.gpu_classes[gpu_class].nodes
        return gpu_class if nodes == 1 else f"{gpu_class} node {k + 1} of {nodes}"

    @cached_property
    def _nodes(self) -> dict[str, tuple[str, int]]:
        """The nominal nodes of the classes that run workers, each by its name (`node_name`): (class, k)."""
        classes = dict.fromkeys(g.gpu_class for g in self.active)
        return {self.node_name(c, k): (c, k) for c in classes for k in range(self.config.gpu_classes[c].nodes)}

    def _host(self, name: str) -> Host:
        """A nominal node (this module's docstring): what the stack states of it, the GPUs (whole) or
        the time-sliced units it has, where it states them."""
        cls = self.config.gpu_classes[self._nodes[name][0]]
        if cls.sharing == "whole":
            offers = {cls.resource: Fraction(cls.gpus_per_node)}
        elif cls.slices_per_gpu is not None:
            offers = {cls.resource: Fraction(cls.gpus_per_node * cls.slices_per_gpu)}
        else:
            offers = {}
        return Host(name, offers, domain=name)

    @cached_property
    def _pods(self) -> dict[str, Replica]:
        """Each running replica by its pod's name, before it is placed (node -1, no GPUs)."""
        return {f"{g.name}-{i}": Replica(g, i, -1, ()) for g in self.active for i in range(g.replicas)}

    @cached_property
    def decision(self) -> Decision:
        """The decision (decide.py) for every running replica on its class's nominal nodes: each pod
        asks its devices (`devices`) of what a nominal node states it has."""
        return self._decided(smaller_first=False)

    @cached_property
    def _smaller_first(self) -> Decision:
        """The decision with the smaller pods first (`unplaced_smaller_first`)."""
        return self._decided(smaller_first=True)

    def _decided(self, smaller_first: bool) -> Decision:
        """The decision in the order it takes the pods (`decision`), or smaller first."""
        hosts = [self._host(name) for name in self._nodes]
        by_class: dict[str, list[Host]] = {}
        for h in hosts:
            by_class.setdefault(self._nodes[h.name][0], []).append(h)
        names = {c: frozenset(h.name for h in mine) for c, mine in by_class.items()}
        pods = []
        for name, r in self._pods.items():
            offers = by_class[r.gpu_class][0].allocatable
            asks = {res: Fraction(n) for res, n in self.devices(r.group).items() if res in offers}
            pods.append(Pod(name, r.group.name, asks, names[r.gpu_class], r.group.spread))
        return place(hosts, pods, smaller_first)

    @cached_property
    def replicas(self) -> tuple[Replica, ...]:
        """Every replica where it is expected to land, in the stack's order (this module's docstring);
        worked out once. Raises ValueError where one lands nowhere: the sizing refuses such a stack
        (whole_gpus_fit, and the time-sliced units it counts)."""
        if self.decision.pending:
            raise ValueError(f"no nominal node takes {', '.join(self.decision.pending)}: the sizing refuses this stack")
        node: dict[str, int] = {}
        gpus: dict[str, tuple[int, ...]] = {}
        for host, pods in self.decision.placed.items():
            cls = self.config.gpu_classes[self._nodes[host][0]]
            taken = 0
            for i, p in enumerate(pods):  # the device plugin's GPUs, in the order the pods landed
                node[p.name] = self._nodes[host][1]
                if cls.sharing == "whole":
                    gpus[p.name] = tuple(range(taken, taken + self.gpus_per_pod(self._pods[p.name].group)))
                    taken += len(gpus[p.name])
                else:
                    gpus[p.name] = (i % cls.gpus_per_node,)
        return tuple(Replica(r.group, r.index, node[name], gpus[name]) for name, r in self._pods.items())

    def node_pairs(self, from_group: str, to_group: str) -> list[tuple[tuple[str, int], tuple[str, int]]]:
        """The (class, node) pairs a transfer from one group's replicas to another's crosses, each
        once, sorted."""
        def nodes(group: str) -> set[tuple[str, int]]:
            return {(r.gpu_class, r.node) for r in self.replicas if r.group.name == group}
        return [(p, d) for p in sorted(nodes(from_group)) for d in sorted(nodes(to_group))]
