"""The stack file's schema, as one import: every section's model from its own module.

A stack file holds only what differs from the defaults. Keys are camelCase, as Pulumi config keys
usually are (`dynamo-lab:workers`, `memoryLimit`, ...); unknown keys are errors, never ignored.
Checks that need one value live on the models, in each section's module; checks across keys live
in `infra.validate` and read the resolved stack (infra/resolved.py); `infra.load` turns raw Pulumi
config into a `StackConfig` or a `ConfigError`.

Each field's `description` is what the key means to a user, and its `json_schema_extra` says what
the type cannot: `accepts` (the values taken, where the type and its constraints say less) and
`default_text` (a default filled per stack or by the code, in words). docs/configuration.md's
reference is generated from them (`python3 dev.py config-reference`, dynamo_lab/config_reference.py);
the `#` comments say why, for whoever changes the code, and never repeat the description.

| module | section |
|---|---|
| base.py | `PROJECT`, the model base |
| gpu_classes.py | `gpuClasses` |
| platform.py | `platform` |
| model.py | `model` |
| graph.py | `frontend`, `graph` |
| workers.py | `workers` |
| workload.py | `workload` |
| sizing_parameters.py | `sizing` |
| jobs.py | `probe`, `benchmark` |
| model_cache.py | `modelCache` |
| target.py | the `kubernetes:*` keys: the cluster the stack deploys to |
| stack.py | the whole stack |
"""

from __future__ import annotations

from infra.config.base import PROJECT, Section
from infra.config.gpu_classes import GpuClass, NodeRequirement
from infra.config.graph import Frontend, FrontendSource, Graph
from infra.config.jobs import BENCH_READY_WAIT_SECONDS, FINISHED_JOB_TTL, Benchmark, Probe
from infra.config.model import Model
from infra.config.model_cache import DATA_ROOTS, NODE_CACHE_PREFIX, ModelCache, ModelCacheClaim, PrePull
from infra.config.platform import Platform
from infra.config.sizing_parameters import Link, MeasuredThroughput, SizingParameters
from infra.config.stack import StackConfig
from infra.config.target import ClusterTarget
from infra.config.workers import KvTransfer, WorkerGroup
from infra.config.workload import Workload

__all__ = [
    "BENCH_READY_WAIT_SECONDS", "DATA_ROOTS", "FINISHED_JOB_TTL", "NODE_CACHE_PREFIX", "PROJECT", "Benchmark",
    "ClusterTarget", "Frontend", "FrontendSource", "GpuClass", "Graph", "KvTransfer", "Link", "MeasuredThroughput",
    "Model", "ModelCache", "ModelCacheClaim", "NodeRequirement", "Platform", "PrePull", "Probe", "SizingParameters",
    "StackConfig", "WorkerGroup", "Workload", "Section",
]
