"""The whole stack file: one model holding every section, each section's model in its own module.

What a stack derives from it (names, contexts, the groups that run, where caches are) is the resolved
stack's (infra/resolved.py), never a property here."""

from __future__ import annotations

from typing import Optional

from pydantic import Field, SecretStr

from infra.catalogue import DEFAULT_GPU_CLASSES, SERVING_IMAGE
from infra.config.base import Section
from infra.config.fields import OperatorImage
from infra.config.gpu_classes import GpuClass
from infra.config.graph import Frontend, Graph
from infra.config.jobs import Benchmark, Probe
from infra.config.model import Model
from infra.config.model_cache import ModelCache
from infra.config.platform import Platform
from infra.config.sizing_parameters import SizingParameters
from infra.config.target import ClusterTarget
from infra.config.workers import WorkerGroup
from infra.config.workload import Workload


class StackConfig(Section):
    gpu_classes: dict[str, GpuClass] = Field(
        default_factory=lambda: {k: GpuClass.model_validate(v) for k, v in DEFAULT_GPU_CLASSES.items()},
        description="the kinds of GPU node, by name; replaces the defaults (\"GPU classes and node placement\", below) "
        "when set", json_schema_extra={"accepts": "a map of name to a GPU class"},
    )
    platform: Platform = Field(Platform(), description="the Dynamo platform chart")
    model: Model = Field(Model(), description="the served model")
    image: OperatorImage = Field(SERVING_IMAGE, description="every container's image", json_schema_extra={
        "accepts": "an image whose tag is a semantic version, with an optional leading `v` (the Dynamo operator's "
                   "rule)"})
    frontend: Frontend = Field(Frontend(), description="the frontend pods")
    graph: Graph = Field(Graph(), description="the DynamoGraphDeployment")
    workers: list[WorkerGroup] = Field(min_length=1, description="the worker groups",
                                       json_schema_extra={"accepts": "a list of worker groups (below)"})
    workload: Workload = Field(Workload(), description="the requests the variant is sized for")
    sizing: SizingParameters = Field(SizingParameters(), description="the sizing's parameters")
    probe: Probe = Field(Probe(), description="the in-cluster KV-transfer probe")
    benchmark: Benchmark = Field(Benchmark(), description="the benchmark sweep")
    model_cache: ModelCache = Field(ModelCache(), description="the workers' Hugging Face cache")
    hf_token: Optional[SecretStr] = Field(None, description="Hugging Face token; only the pods that download from "
                                          "the Hub read it (docs/security.md)", json_schema_extra={
        "accepts": "a Pulumi secret only: `pulumi config set --secret hfToken ... --stack STACK`; a plain-text "
                   "token is refused (and never shown)"})
    # Filled by infra.load from the kubernetes:* keys (it refuses a `dynamo-lab:target` or
    # `dynamo-lab:cluster` key).
    target: Optional[ClusterTarget] = Field(None, description="the cluster the stack deploys to, from the "
                                             "`kubernetes:*` keys")
