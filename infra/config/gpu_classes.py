"""`gpuClasses`: the kinds of GPU node, and the node requirements that select them."""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import Field, model_validator

from infra.config.base import Section
from infra.config.fields import Bytes, KeyProblem, LabelKey, ResourceName, Throughput, label_value


class NodeRequirement(Section):
    """One `matchExpressions` entry of a required node affinity term (ANDed with the others)."""

    key: LabelKey = Field(description="the node label the requirement tests",
                          json_schema_extra={"accepts": "a label key (`[prefix/]name`, e.g. `nvidia.com/gpu.memory`)"})
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] = Field(
        description="how the label is tested, as in a node affinity's `matchExpressions`")
    values: list[str] = Field([], description="the values the operator compares the label with", json_schema_extra={
        "accepts": "label values: at least one for `In`/`NotIn`, none for `Exists`/`DoesNotExist`, exactly one "
                   "integer for `Gt`/`Lt` (e.g. `[\"20000\"]`)"})

    @model_validator(mode="after")
    def _values_fit_operator(self) -> "NodeRequirement":
        # Same rules as the API server's node selector validation.
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise KeyProblem("values", f"operator {self.operator} takes no values; remove `values`")
        if self.operator in ("In", "NotIn"):
            if not self.values:
                raise KeyProblem("values", f"operator {self.operator} needs at least one value")
            for i, value in enumerate(self.values):
                try:
                    label_value(value)
                except ValueError as exc:
                    raise KeyProblem("values", str(exc), index=i) from None
        if self.operator in ("Gt", "Lt"):
            if len(self.values) != 1 or not re.fullmatch(r"-?\d+", self.values[0]):
                raise KeyProblem("values",
                                 f"operator {self.operator} needs exactly one integer value, e.g. values: ['20000']"
                )
        return self


class GpuClass(Section):
    """A kind of GPU node: how many nodes of it, how many GPUs each, and whether workers share a GPU.
    The lab has one node with one time-sliced GPU per class; all workers of a class share it."""

    memory: Bytes = Field(description="the GPU memory one card of this class has (as GPU feature discovery "
                          "reports it)")
    # With one physical GPU and several workers, the NVIDIA device plugin must advertise
    # time-sliced replicas of this resource (docs/sources.md, "Several workers on one GPU").
    resource: ResourceName = Field("nvidia.com/gpu", description="the extended resource each worker requests one "
                                   "unit of", json_schema_extra={"accepts": "an extended resource name (e.g. "
                                   "`nvidia.com/gpu.shared` for renamed time-sliced replicas)"})
    node_selector: list[NodeRequirement] = Field(min_length=1, description="the nodes of this class: a required node "
                                                 "affinity, its requirements ANDed", json_schema_extra={
                                                     "accepts": "a list of node requirements (below), at least one"})
    # Bounds far beyond the small clusters this project sizes (HGX boards carry 8 or 16 GPUs): the
    # sizing and the pre-pull Job count per node and per GPU.
    nodes: int = Field(1, ge=1, le=1024, description="how many nodes `nodeSelector` matches; the sizing plans each "
                       "alike and preflight checks the count against the cluster")
    gpus_per_node: int = Field(1, ge=1, le=64, description="the physical GPUs on each node (GPU feature discovery's "
                               "`nvidia.com/gpu.count`)")
    # The NVIDIA device plugin either advertises each card once (a worker owns its GPUs) or, with a
    # time-slicing config, N replicas of it that share the card's memory with no isolation
    # (docs/sources.md, "Several workers on one GPU").
    sharing: Literal["timeSliced", "whole"] = Field("timeSliced", description="`timeSliced`: the device plugin "
                                                    "advertises time-sliced replicas and several workers share "
                                                    "one GPU's memory; `whole`: each worker owns the GPUs it "
                                                    "requests (what `tensorParallel` above 1 needs)")
    slices_per_gpu: Optional[int] = Field(None, ge=1, le=1024, description="time-sliced classes: the device plugin's "
                                          "replicas per GPU (`sharing.timeSlicing.resources[].replicas`), so at "
                                          "most this many workers share one GPU", json_schema_extra={
                                              "default_text": "unset: every worker on a node may share one GPU"})
    rdma_resource: Optional[ResourceName] = Field(None, description="the RDMA device plugin's resource each "
                                                  "worker with `kvTransfer.transport: rdma` requests one of",
                                                  json_schema_extra={
                                                      "accepts": "an extended resource name (e.g. "
                                                                 "`rdma/rdma_shared_device_a`)",
                                                      "default_text": "unset: no RDMA on these nodes"})
    memory_reserve: float = Field(0.10, ge=0.0, lt=1.0, description="the fraction of GPU memory no worker may plan "
                                  "to use (driver, display, fragmentation)")
    # The one prefill efficiency: the sizing's prefill estimate and the predictor's prefill steps both run
    # at this rate (infra/sizing/formulas.py, prefill_flops_per_second), never at a fraction of their own.
    effective_tflops: float = Field(gt=0, description="ESTIMATE: sustained prefill TFLOP/s of one GPU (a worker's "
                                    "ranks have it each), at most `peakTflops`; the sizing's prefill estimate and "
                                    "the predictor's prefill steps both run at it. Prefill reaches about 40-65% "
                                    "of the dense peak (docs/predictor.md, \"The one prefill efficiency\")")
    # The predictor's GPU costs (docs/predictor.md): a decode step reads the weights and every running
    # request's KV from DRAM; a prefill is matrix math at a fraction of the peak. The defaults' values
    # are the lab's cards (infra/catalogue.py, LAB_CARDS).
    memory_bandwidth: Optional[Throughput] = Field(None, description="the card's DRAM bandwidth, bytes/s (its "
                                                   "datasheet); only `predict` and `advise` use it, and need it",
                                                   json_schema_extra={"accepts": "a byte rate, e.g. `936G`"})
    peak_tflops: Optional[float] = Field(None, gt=0, description="the card's dense BF16 tensor TFLOP/s (its "
                                         "datasheet, without sparsity); only `predict` and `advise` use it, and "
                                         "need it")

    @model_validator(mode="after")
    def _effective_within_peak(self) -> "GpuClass":
        if self.peak_tflops is not None and self.effective_tflops > self.peak_tflops:
            raise KeyProblem("effectiveTflops",
                             f"effectiveTflops {self.effective_tflops:g} is above peakTflops {self.peak_tflops:g}: "
                             "no kernel runs above the card's dense peak, and prefill sustains about 40-65% of it. "
                             f"Write effectiveTflops at most {self.peak_tflops:g}, e.g. "
                             f"{round(self.peak_tflops * 0.55):g} (55% of the peak), or correct peakTflops")
        return self

    @model_validator(mode="after")
    def _slices_only_when_sliced(self) -> "GpuClass":
        if self.sharing == "whole" and self.slices_per_gpu is not None:
            raise KeyProblem("slicesPerGpu",
                             "slicesPerGpu applies to sharing: timeSliced only; with sharing: whole each worker "
                             "owns its GPUs. Remove slicesPerGpu, or write sharing: timeSliced")
        return self

    @model_validator(mode="after")
    def _rdma_apart_from_gpus(self) -> "GpuClass":
        if self.rdma_resource is not None and self.rdma_resource == self.resource:
            raise KeyProblem("rdmaResource",
                             f"rdmaResource {self.rdma_resource} is the class's GPU resource: a worker requests its "
                             "GPUs and one RDMA device as two resources. Write the resource the RDMA device plugin "
                             "advertises, e.g. rdma/rdma_shared_device_a (kubectl describe node: Allocatable)")
        return self

    @property
    def gpus(self) -> int:
        """The class's physical GPUs, over all its nodes."""
        return self.nodes * self.gpus_per_node
