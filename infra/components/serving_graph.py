"""ServingGraph: a graph's namespace, its optional token Secret and model cache, and its
DynamoGraphDeployment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.components import after, manifest_body
from infra.components.model_cache import ModelCache, ModelCacheArgs
from infra.manifests.graph import HF_TOKEN_SECRET


@dataclass(frozen=True)
class ServingGraphArgs:
    # The DynamoGraphDeployment manifest (manifests.graph.deployment); its namespace is created here.
    deployment: dict[str, Any]
    # Hugging Face token, kept secret; None: no Secret and no envFrom.
    hf_token: Optional[pulumi.Input[str]] = None
    # The model cache's claim and pre-pull Jobs; None: nothing to create for it.
    model_cache: Optional[ModelCacheArgs] = None
    # Labels of the graph's namespace (manifests.owner_labels: which stack owns it).
    namespace_labels: dict[str, str] = field(default_factory=dict)
    # NetworkPolicies of the graph namespace (manifests.graph.network_policies); empty: none.
    network_policies: list[dict[str, Any]] = field(default_factory=list)


class ServingGraph(pulumi.ComponentResource):
    """The serving graph of one variant: namespace, optional HF token Secret, DynamoGraphDeployment.

    Pass the platform release in `opts.depends_on`: the operator's admission webhook (failurePolicy
    Fail) and CRDs exist only once it is Ready, and the DynamoGraphDeployment waits for it. The
    model cache is a child, not a dependency passed in: its Jobs need this namespace and Secret, and
    the DynamoGraphDeployment waits for them.
    """

    def __init__(self, name: str, args: ServingGraphArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("dynamo-lab:index:ServingGraph", name, None, opts)
        meta = args.deployment["metadata"]
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=meta["namespace"], labels=args.namespace_labels or None),
            opts=after(self, opts))
        ns = self.namespace.metadata.name
        needs: list[pulumi.Resource] = [self.namespace]
        if args.hf_token is not None:
            self.token_secret = k8s.core.v1.Secret(
                f"{name}-hf-token",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=HF_TOKEN_SECRET, namespace=ns),
                type="Opaque",
                string_data={"HF_TOKEN": pulumi.Output.secret(args.hf_token)},
                opts=after(self, opts),
            )
            needs.append(self.token_secret)
        self.network_policies = [
            k8s.networking.v1.NetworkPolicy(f"{name}-{doc['metadata']['name']}", **manifest_body(doc),
                                            opts=after(self, opts, self.namespace))
            for doc in args.network_policies]
        if args.model_cache is not None:
            self.model_cache = ModelCache(f"{name}-model-cache", args.model_cache, after(self, opts, *needs))
            needs += self.model_cache.ready
        self.deployment = k8s.apiextensions.CustomResource(
            f"{name}-dgd",
            api_version=args.deployment["apiVersion"],
            kind=args.deployment["kind"],
            metadata=k8s.meta.v1.ObjectMetaArgs(name=meta["name"], namespace=ns,
                                                annotations=meta.get("annotations")),
            spec=args.deployment["spec"],
            opts=after(self, opts, *needs),
        )
        self.graph_name = self.deployment.metadata["name"]
        self.register_outputs({"namespace": ns, "graphName": self.graph_name})
