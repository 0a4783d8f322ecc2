"""BenchmarkJob: the AIPerf sweep as a Job next to a serving graph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.components import after, manifest_body


@dataclass(frozen=True)
class BenchmarkJobArgs:
    # From manifests.benchmark.manifests().
    configmap: dict[str, Any]
    job: dict[str, Any]


class BenchmarkJob(pulumi.ComponentResource):
    """Pass the graph (its DynamoGraphDeployment) in `opts.depends_on`: the Job targets its frontend."""

    def __init__(self, name: str, args: BenchmarkJobArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("dynamo-lab:index:BenchmarkJob", name, None, opts)
        self.configmap = k8s.core.v1.ConfigMap(f"{name}-plan", **manifest_body(args.configmap),
                                               opts=after(self, opts))
        self.job = k8s.batch.v1.Job(f"{name}-job", **manifest_body(args.job),
                                    opts=after(self, opts, self.configmap))
        self.register_outputs({"job": self.job.metadata["name"]})
