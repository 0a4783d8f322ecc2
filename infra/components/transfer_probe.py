"""TransferProbe: the in-cluster NIXL probe pair next to a serving graph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.components import after, manifest_body


@dataclass(frozen=True)
class TransferProbeArgs:
    # From manifests.transfer_probe.manifests().
    configmap: dict[str, Any]
    service: dict[str, Any]
    target: dict[str, Any]
    initiator: dict[str, Any]


class TransferProbe(pulumi.ComponentResource):
    """Pass the graph's namespace in `opts.depends_on`."""

    def __init__(self, name: str, args: TransferProbeArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("dynamo-lab:index:TransferProbe", name, None, opts)
        self.configmap = k8s.core.v1.ConfigMap(f"{name}-code", **manifest_body(args.configmap),
                                               opts=after(self, opts))
        self.service = k8s.core.v1.Service(f"{name}-target-svc", **manifest_body(args.service),
                                           opts=after(self, opts))
        self.target = k8s.batch.v1.Job(f"{name}-target", **manifest_body(args.target),
                                       opts=after(self, opts, self.configmap))
        self.initiator = k8s.batch.v1.Job(f"{name}-initiator", **manifest_body(args.initiator),
                                          opts=after(self, opts, self.configmap, self.service))
        self.register_outputs({"initiatorJob": self.initiator.metadata["name"]})
