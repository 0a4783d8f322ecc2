"""ModelCache: the model cache's claim (when dynamo-lab creates one) and the Jobs that fill it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.components import after, manifest_body

# Beyond a Job's activeDeadlineSeconds, for Pulumi to see the Job's final status.
AWAIT_MARGIN_SECONDS = 120


@dataclass(frozen=True)
class ModelCacheArgs:
    # manifests.model_cache.claim(); None: a hostPath cache or an existing claim.
    claim: Optional[dict[str, Any]]
    # manifests.model_pull.jobs(): key (GPU class, or `claim`) -> Job; empty: no pre-pull.
    jobs: dict[str, dict[str, Any]]


def _awaited(job: dict[str, Any]) -> pulumi.ResourceOptions:
    """How long Pulumi waits for the Job to complete: its own activeDeadlineSeconds, and a margin."""
    wait = f"{job['spec']['activeDeadlineSeconds'] + AWAIT_MARGIN_SECONDS}s"
    return pulumi.ResourceOptions(custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait))


class ModelCache(pulumi.ComponentResource):
    """Pass the graph's namespace (and the token Secret the Jobs read) in `opts.depends_on`.

    Pulumi waits for each Job to complete (they carry no skipAwait), so `ready`, which the
    DynamoGraphDeployment waits for, is done only once the model is in every cache.
    """

    def __init__(self, name: str, args: ModelCacheArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("dynamo-lab:index:ModelCache", name, None, opts)
        needs: list[pulumi.Resource] = []
        if args.claim is not None:
            self.claim = k8s.core.v1.PersistentVolumeClaim(f"{name}-claim", **manifest_body(args.claim),
                                                           opts=after(self, opts))
            needs.append(self.claim)
        self.jobs = [
            k8s.batch.v1.Job(f"{name}-pull-{key}", **manifest_body(job),
                             opts=pulumi.ResourceOptions.merge(after(self, opts, *needs), _awaited(job)))
            for key, job in args.jobs.items()
        ]
        self.ready: list[pulumi.Resource] = [*needs, *self.jobs]
        self.register_outputs({"jobs": [j.metadata["name"] for j in self.jobs]})
