"""What a node lacks for the pods placed there: one resource's needs over its allocatable, in words
and with the fix that fits that resource: GPU units (the NVIDIA device plugin, its time-slicing
config, a renamed resource), the RDMA device (the RDMA device plugin and
`gpuClasses.<name>.rdmaResource`), memory and CPU (the requests, or the node)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional

from dynamo_lab.preflight.cluster_data import Node
from dynamo_lab.preflight.gpus import NodeGpus
from dynamo_lab.preflight.pods import PodGroup
from dynamo_lab.preflight.report import Problem
from infra import units
from infra.resolved import ResolvedStack


def fmt(resource: str, value: Fraction) -> str:
    if resource == "memory":
        return units.human(float(value))
    if resource == "cpu" and (value * 1000).denominator == 1:
        return units.format_cpu(int(value * 1000))
    return str(int(value)) if value.denominator == 1 else f"{float(value):g}"


def gpu_units_fix(node: Node, resource: str, need: Fraction, has: Fraction, gpu_class: str) -> str:
    base = resource.removesuffix(".shared")
    replicas = math.ceil(need / (NodeGpus.of(node, resource).count or 1))
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


def short(node: Node, resource: str, need: Fraction, has: Fraction, bound_need: Fraction,
          parts: list[str], bound: list[PodGroup], gpu_class: Optional[str], stack: ResolvedStack,
          waiting: list[str]) -> Problem:
    """A resource the pods on `node` need more of than it has; `waiting`: the Pending pods (packing)
    that have only this node."""
    what = f"needs {fmt(resource, need)} {resource} ({' + '.join(parts)}), allocatable {fmt(resource, has)}"
    cls = stack.config.gpu_classes.get(gpu_class or "")
    if cls is not None and resource == cls.rdma_resource:
        pending = f"{', '.join(waiting)} would stay Pending" if waiting else "some would stay Pending"
        return Problem(f"node {node.name}", "rdma",
                       f"{what}: each worker with kvTransfer.transport: rdma requests one {resource} (gpuClasses."
                       f"{gpu_class}.rdmaResource), so {pending}", rdma_fix(gpu_class or "?", resource, node.name,
                                                                            node, has))
    if resource not in ("memory", "cpu"):
        each = {w.requests.get(resource) for w in bound if w.kind == "worker" and resource in w.requests}
        if each == {1}:  # the lab's: one GPU unit a worker (its words unchanged)
            return Problem(f"node {node.name}", "gpu units",
                           f"{what}: each worker requests one {resource}, so {fmt(resource, need - has)} of them "
                           "would stay Pending", gpu_units_fix(node, resource, need, has, gpu_class or "?"))
        count = NodeGpus.of(node, resource).count if cls is not None else None
        gpus = (f" and has {count} GPU{'' if count == 1 else 's'} (nvidia.com/gpu.count)"
                if count is not None and cls is not None and count != cls.gpus_per_node else "")
        fix = (gpu_units_fix(node, resource, need, has, gpu_class or "?")
               if cls is None or cls.sharing != "whole" or resource != cls.resource else
               f"{node.name} advertises {fmt(resource, has)} {resource}{gpus} and gpuClasses.{gpu_class}.gpusPerNode "
               f"says {cls.gpus_per_node}: check its device plugin, or plan for the GPUs it has (gpuClasses."
               f"{gpu_class}.gpusPerNode), and run fewer replicas or fewer GPUs each (tensorParallel) on this class")
        pending = f"{', '.join(waiting)} would stay Pending" if waiting else "some would stay Pending"
        return Problem(f"node {node.name}", "gpu units", f"{what}: {pending}", fix)
    groups = [w.name for w in bound if w.kind == "worker"]
    if bound_need <= has:
        fix = (f"What is bound here fits, but not with the pods beside it that have no node affinity, which the "
               f"scheduler may place here first. Lower frontend.{resource}"
               f"{' (and the benchmark Job)' if any('benchmark' in p for p in parts) else ''}, "
               f"or free {resource} on {node.name}")
    elif resource == "memory":
        fix = (f"Lower the memory the workers here request ({', '.join(f'workers.{g}.memoryRequest' for g in groups)}"
               f"; not below the host memory floor `python3 dev.py sizing {stack.name}` shows, which a smaller "
               f"kvCacheBytes lowers), run fewer replicas on this node, or give {node.name} more memory")
    else:
        fix = (f"Lower {', '.join(f'workers.{g}.cpuRequest' for g in groups)}, run fewer replicas on this node, "
               f"or give {node.name} more CPUs")
    return Problem(f"node {node.name}", resource, what, fix)


def rdma_fix(gpu_class: str, resource: str, where: str, node: Optional[Node] = None,
             has: Fraction = Fraction(0)) -> str:
    """The fix for too few of the class's RDMA resource on `where` (a node, or the class's nodes): the
    RDMA device plugin, not the NVIDIA one, advertises it, under the name gpuClasses.<name>.rdmaResource
    gives."""
    key = f"gpuClasses.{gpu_class}.rdmaResource"
    if node is not None and has > 0:
        return (f"On {where}, {fmt(resource, has)} {resource} are advertised: raise its count in the RDMA shared "
                "device plugin's config (rdmaHcaMax of that resource), or run fewer RDMA workers there")
    other = sorted(k for k, v in (node.allocatable.items() if node is not None else ()) if k.startswith("rdma/")
                   and k != resource and v > 0)
    if other:
        return (f"On {where} the RDMA device plugin advertises {', '.join(other)} instead of {resource}: set "
                f"{key}: {other[0]} (the name the nodes advertise), "
                f"or configure the RDMA device plugin to advertise {resource}")
    return (f"Install the RDMA device plugin (k8s-rdma-shared-dev-plugin, e.g. through the NVIDIA network operator) "
            f"on {where} so that {resource} is advertised there; or, if it advertises another name, set {key} to "
            "that name (kubectl describe node: Allocatable)")
