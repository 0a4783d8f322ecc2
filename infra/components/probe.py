"""TransferProbe: the in-cluster NIXL probe pair next to a serving graph."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from infra import probe_spec
from infra.components import manifest_body
from infra.config import StackConfig


@dataclass
class TransferProbeArgs:
    config: StackConfig
    stack: str
    bytes_per_transfer: int
    # The graph's namespace (and anything else the probe must wait for).
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class TransferProbe(pulumi.ComponentResource):
    def __init__(self, name: str, args: TransferProbeArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("dynamo-lab:index:TransferProbe", name, None, opts)
        m = probe_spec.manifests(args.config, args.stack, args.bytes_per_transfer)
        after = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)

        self.configmap = k8s.core.v1.ConfigMap(f"{name}-code", **manifest_body(m["configmap"]), opts=after)
        self.service = k8s.core.v1.Service(f"{name}-target-svc", **manifest_body(m["service"]), opts=after)
        code = pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, self.configmap])
        self.target = k8s.batch.v1.Job(f"{name}-target", **manifest_body(m["target"]), opts=code)
        self.initiator = k8s.batch.v1.Job(f"{name}-initiator", **manifest_body(m["initiator"]),
                                          opts=pulumi.ResourceOptions(parent=self, depends_on=[
                                              *args.depends_on, self.configmap, self.service]))
        self.register_outputs({"logs": probe_spec.logs_command(args.config, args.stack)})
