"""BenchmarkJob: the AIPerf sweep as a Job next to a serving graph."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from infra import bench_spec
from infra.components import manifest_body
from infra.config import StackConfig


@dataclass
class BenchmarkJobArgs:
    config: StackConfig
    stack: str
    # The graph (its DynamoGraphDeployment): the Job targets its frontend.
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class BenchmarkJob(pulumi.ComponentResource):
    def __init__(self, name: str, args: BenchmarkJobArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("dynamo-lab:index:BenchmarkJob", name, None, opts)
        m = bench_spec.manifests(args.config, args.stack)
        self.configmap = k8s.core.v1.ConfigMap(
            f"{name}-plan", **manifest_body(m["configmap"]),
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        self.job = k8s.batch.v1.Job(
            f"{name}-job", **manifest_body(m["job"]),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, self.configmap]))
        self.register_outputs({"logs": bench_spec.logs_command(args.config, args.stack)})
