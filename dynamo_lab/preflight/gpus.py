"""A node's GPUs as the node really has them, judged against the GPU class the stack file writes.

GPU feature discovery labels a node with its physical GPUs (`nvidia.com/gpu.count`) and, with a
sharing config, the replicas each advertises (`nvidia.com/gpu.replicas`) and how
(`nvidia.com/gpu.sharing-strategy`: `none`, `time-slicing`, `mps`); the device plugin advertises
units of the class's resource (allocatable). More units than GPUs means time-sliced, units / GPUs
replicas a GPU (the labels, where present, say so directly). Against the class (`sharing`,
`gpusPerNode`, `slicesPerGpu`, which the sizing planned for):

- `sharing: whole` on a time-sliced node: a problem (the device plugin may hand two workers, or one
  worker's tensor-parallel ranks, slices of one card; the sizing planned each worker its own GPUs).
- The workers that may share one card there: on a time-sliced node min(the workers packed there,
  its replicas a GPU), all of them where it has one GPU; 1 on whole GPUs (the caller compares it
  with the sizing's planned `sharing`). Without `nvidia.com/gpu.count` the class's word is taken.
- MPS sharing (`sharing-strategy=mps`): a problem (MPS caps each worker's memory at the card's over
  its replicas; the sizing plans time-sliced shares). A count below one is taken as no count;
  without a count, the replicas label gives one (units / replicas).
- Fewer GPUs than `gpusPerNode`: a problem where the pods placed there need more whole GPUs than
  the node has (unless the GPU units check already said so), else a note; more: a note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

from dynamo_lab.preflight.cluster_data import Node
from dynamo_lab.preflight.report import GpuMemory, Problem, Report
from infra import units
from infra.config.schema import GpuClass
from infra.resolved import ResolvedStack

GPU_COUNT_LABEL = "nvidia.com/gpu.count"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"


def _int(text: Optional[str]) -> Optional[int]:
    return int(text) if text is not None and text.isdigit() else None


@dataclass(frozen=True)
class NodeGpus:
    """One node's GPUs: `count` physical (None: no GFD label), `units` of a resource advertised,
    `replicas` each GPU is advertised as (1: not shared), and where that came from, in words."""

    count: Optional[int]
    units: Fraction
    replicas: int
    source: str

    @property
    def sliced(self) -> bool:
        return self.replicas > 1

    @classmethod
    def of(cls, node: Node, resource: str) -> "NodeGpus":
        # A count below one says nothing (a node with a GPU resource has a GPU): as if unlabelled.
        count = _int(node.labels.get(GPU_COUNT_LABEL)) or None
        have = node.allocatable.get(resource, Fraction(0))
        labelled, strategy = _int(node.labels.get(REPLICAS_LABEL)), node.labels.get(STRATEGY_LABEL)
        if count is None and labelled and have:
            # No count, but the replicas each GPU is advertised as: units / replicas GPUs.
            count = math.ceil(have / labelled)
        if strategy == "none":
            return cls(count, have, 1, f"{STRATEGY_LABEL}=none")
        if labelled is not None and labelled >= 1:
            how = f", {STRATEGY_LABEL}={strategy}" if strategy else ""
            return cls(count, have, labelled, f"{REPLICAS_LABEL}={labelled}{how}")
        if count and have > count:
            return cls(count, have, math.ceil(have / count),
                       f"{have} {resource} advertised for {count} GPU{'s' if count > 1 else ''}")
        return cls(count, have, 1, "one unit a GPU")

    def described(self, resource: str) -> str:
        gpus = "?" if self.count is None else str(self.count)
        return (f"{gpus} GPU{'' if self.count == 1 else 's'} ({GPU_COUNT_LABEL}), advertised as {self.units} "
                f"{resource}, time-sliced {self.replicas} ways ({self.source})")


def sharing_here(cls: GpuClass, node: Node, workers: int) -> int:
    """The most of the `workers` the packing put on `node` that may share one of its GPUs, as the node
    is: on a time-sliced node the device plugin does not say which card a replica is, so any
    min(workers, replicas a GPU) may share one (all of them on a node of one GPU); on whole GPUs one.
    Without GPU feature discovery's count, the class's word: one for `whole`, else min(workers,
    slicesPerGpu) (Placement.sharing_one_gpu's rule, with the workers there)."""
    gpus = NodeGpus.of(node, cls.resource)
    if gpus.count is None:
        if cls.sharing == "whole":
            return min(workers, 1)
        return workers if cls.slices_per_gpu is None else min(workers, cls.slices_per_gpu)
    if not gpus.sliced:
        return min(workers, 1)
    return workers if gpus.count == 1 else min(workers, gpus.replicas)


def over_shared(stack: ResolvedStack, node: Node, gpu_class: str, fits, gpu: GpuMemory) -> Problem:
    """More of the class's workers may share one of `node`'s GPUs than the sizing planned each GPU for."""
    cls = stack.config.gpu_classes[gpu_class]
    gpus = NodeGpus.of(node, cls.resource)
    what = (f"{gpu.workers} {gpu_class} workers land on {node.name}, where up to {gpu.sharing} may share one GPU "
            f"(time-slicing does not say which card a replica is), and the sizing planned each GPU for "
            f"{fits.sharing} ({units.human(fits.planned_bytes)}); time-slicing does not isolate memory")
    fix = (f"Plan for the nodes this class has (gpuClasses.{gpu_class}.nodes) so the sizing plans each GPU for the "
           "workers that land together, or run fewer replicas on this class")
    if cls.sharing == "timeSliced" and cls.slices_per_gpu is not None and gpus.replicas > cls.slices_per_gpu:
        what += (f". {node.name} has {gpus.described(cls.resource)}, where gpuClasses.{gpu_class}.slicesPerGpu "
                 f"says {cls.slices_per_gpu}")
        fix = (f"Give the NVIDIA device plugin `replicas: {cls.slices_per_gpu}` on {node.name} (its time-slicing "
               f"config), or write gpuClasses.{gpu_class}.slicesPerGpu: {gpus.replicas} so the sizing plans each GPU "
               f"for the workers that may share it (`python3 dev.py sizing {stack.name}`), or run fewer replicas on "
               "this class")
    return Problem(f"node {node.name}", "gpu memory", what, fix)


def class_on_node(stack: ResolvedStack, gpu_class: str, node: Node, needed: Fraction, parts: list[str],
                  units_reported: bool, report: Report) -> bool:
    """The node's GPUs against the class: `needed`, the class's GPU units its worker pods here request
    (`parts`, in words); `units_reported`: the GPU units check already reported this node. False:
    a problem was reported (the node's sharing problem says it, not the memory check's)."""
    cls = stack.config.gpu_classes[gpu_class]
    gpus = NodeGpus.of(node, cls.resource)
    ok = True
    key = f"gpuClasses.{gpu_class}"
    if node.labels.get(STRATEGY_LABEL) == "mps" and gpus.sliced:
        # MPS, unlike time-slicing, caps each client's GPU memory at the card's over its replicas (the
        # NVIDIA device plugin's MPS sharing): the sizing plans shares of an uncapped card.
        ok = False
        report.problems.append(Problem(
            f"node {node.name}", "gpu sharing",
            f"shares its GPUs with MPS ({STRATEGY_LABEL}=mps, {gpus.replicas} replicas a GPU), which caps each "
            f"worker's GPU memory at the card's over {gpus.replicas}; dynamo-lab sizes time-sliced sharing, each "
            "worker's share of an uncapped card, so a worker planned above the cap would fail to allocate",
            f"Share {node.name}'s GPUs by time-slicing (the device plugin's sharing.timeSlicing) or not at all "
            f"(whole GPUs, {key}.sharing: whole)"))
    if cls.sharing == "whole" and gpus.sliced:
        ok = False
        gpu_count = ("its one GPU once" if gpus.count == 1 else
                     f"each of its {gpus.count} GPUs once" if gpus.count else "each GPU once")
        report.problems.append(Problem(
            f"node {node.name}", "gpu sharing",
            f"has {gpus.described(cls.resource)}, and {key}.sharing is whole: the sizing planned each worker its "
            "own GPUs, but the device plugin may give two workers, or one worker's tensor-parallel ranks, slices "
            "of one card, whose memory time-slicing does not isolate",
            f"Run the NVIDIA device plugin without time-slicing on {node.name} (so it advertises {gpu_count}); or "
            f"write {key}.sharing: timeSliced, slicesPerGpu: {gpus.replicas}, and tensorParallel 1 for its workers, "
            f"then size again (`python3 dev.py sizing {stack.name}`)"))
    if gpus.count is None:
        return ok
    planned = cls.gpus_per_node
    if cls.sharing == "whole" and needed > gpus.count and not units_reported:
        ok = False
        sliced = (f"; the device plugin advertises {gpus.units} {cls.resource} there only because it time-slices "
                  "them, so the scheduler would give them slices of one card" if gpus.sliced else "")
        report.problems.append(Problem(
            f"node {node.name}", "gpus",
            f"its pods need {needed} whole GPUs ({' + '.join(parts)}), and it has {gpus.count} "
            f"({GPU_COUNT_LABEL}) where {key}.gpusPerNode plans {planned}{sliced}",
            f"Plan for the GPUs there: {key}.gpusPerNode: {gpus.count}, with fewer replicas or fewer GPUs each "
            f"(tensorParallel) so its {gpus.count} hold them; or point {key}.nodeSelector at nodes with "
            f"{planned} GPUs"))
    elif gpus.count != planned:
        fewer = gpus.count < planned
        report.notes.append(
            f"node {node.name}: has {gpus.count} GPU{'' if gpus.count == 1 else 's'} ({GPU_COUNT_LABEL}), "
            f"{'fewer' if fewer else 'more'} than the {planned} {key}.gpusPerNode plans; "
            + ("the sizing planned for fewer" if not fewer else
               "the pods placed there need no more whole GPUs than it has" if cls.sharing == "whole" else
               "its time-sliced units hold the workers placed there, and the GPU memory check weighs how many of "
               "them may share one card")
            + f". Write {key}.gpusPerNode: {gpus.count} to plan for the GPUs there")
    return ok
