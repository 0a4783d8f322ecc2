"""`gpuClasses`: the kinds of GPU node, and the node requirements that select them."""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import Field, model_validator

from infra.config.base import _Model
from infra.config.fields import Bytes, LabelKey, ResourceName, Throughput, label_value


class NodeRequirement(_Model):
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
            raise ValueError(f"operator {self.operator} takes no values; remove `values`")
        if self.operator in ("In", "NotIn"):
            if not self.values:
                raise ValueError(f"operator {self.operator} needs at least one value")
            for value in self.values:
                label_value(value)
        if self.operator in ("Gt", "Lt"):
            if len(self.values) != 1 or not re.fullmatch(r"-?\d+", self.values[0]):
                raise ValueError(
                    f"operator {self.operator} needs exactly one integer value, e.g. values: ['20000']"
                )
        return self


class GpuClass(_Model):
    """A kind of GPU node. The lab has one node with one GPU per class; all workers of a class share it."""

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
    memory_reserve: float = Field(0.10, ge=0.0, lt=1.0, description="the fraction of GPU memory no worker may plan "
                                  "to use (driver, display, fragmentation)")
    effective_tflops: float = Field(gt=0, description="ESTIMATE: sustained prefill TFLOP/s of one worker; only the "
                                    "prefill-time estimate uses it")
    # The predictor's GPU costs (docs/predictor.md): a decode step reads the weights and every running
    # request's KV from DRAM; a prefill is matrix math at a fraction of the peak. The defaults' values
    # are the lab's cards (infra/catalogue.py, LAB_CARDS).
    memory_bandwidth: Optional[Throughput] = Field(None, description="the card's DRAM bandwidth, bytes/s (its "
                                                   "datasheet); only `predict` and `advise` use it, and need it",
                                                   json_schema_extra={"accepts": "a byte rate, e.g. `936G`"})
    peak_tflops: Optional[float] = Field(None, gt=0, description="the card's dense BF16 tensor TFLOP/s (its "
                                         "datasheet, without sparsity); only `predict` and `advise` use it, and "
                                         "need it")
