"""ServingGraph: a graph's namespace, its optional token Secret and its DynamoGraphDeployment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from infra import graph_spec
from infra.config import StackConfig
from infra.sizing import Report


@dataclass
class ServingGraphArgs:
    config: StackConfig
    stack: str
    report: Report
    # The platform release when this stack manages it. Children do not inherit the component's
    # depends_on, so the DynamoGraphDeployment names it itself: the operator's admission webhook
    # (failurePolicy Fail) and CRDs exist only once the release is Ready.
    platform: list[pulumi.Resource] = field(default_factory=list)


class ServingGraph(pulumi.ComponentResource):
    """The serving graph of one variant: namespace, optional HF token Secret, DynamoGraphDeployment."""

    def __init__(self, name: str, args: ServingGraphArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("dynamo-lab:index:ServingGraph", name, None, opts)
        cfg = args.config
        child = pulumi.ResourceOptions(parent=self)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns", metadata=k8s.meta.v1.ObjectMetaArgs(name=cfg.graph.namespace), opts=child)
        ns = self.namespace.metadata.name
        needs = [self.namespace, *args.platform]
        if cfg.hf_token is not None:
            token = pulumi.Output.secret(cfg.hf_token.get_secret_value())
            self.token_secret = k8s.core.v1.Secret(
                f"{name}-hf-token",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=graph_spec.HF_TOKEN_SECRET, namespace=ns),
                type="Opaque",
                string_data={"HF_TOKEN": token},
                opts=child,
            )
            needs.append(self.token_secret)
        self.deployment = k8s.apiextensions.CustomResource(
            f"{name}-dgd",
            api_version=graph_spec.API_VERSION,
            kind=graph_spec.KIND,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=cfg.graph.name, namespace=ns),
            spec=graph_spec.graph_spec(cfg, args.report),
            opts=pulumi.ResourceOptions(parent=self, depends_on=needs),
        )
        self.graph_name = self.deployment.metadata["name"]
        self.register_outputs({"namespace": ns, "graphName": self.graph_name})
