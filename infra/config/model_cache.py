"""`modelCache`: where the workers' Hugging Face cache lives (node directories, a claim, or none)."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BeforeValidator, Field, model_validator

from infra import units
from infra.config.base import Section
from infra.config.fields import Bytes, KeyProblem, OptionalDnsLabel


class ModelCacheClaim(Section):
    """The PersistentVolumeClaim of `modelCache.mode: pvc`: an existing one, or one dynamo-lab creates."""

    # An existing claim in the graph namespace: dynamo-lab creates none and cannot see its size.
    claim_name: OptionalDnsLabel = Field(None, description="an existing claim in the graph namespace; unset: "
                                         "dynamo-lab creates `<graph>-model-cache`")
    storage_class: Optional[str] = Field(None, description="the StorageClass of the claim dynamo-lab creates",
                                         json_schema_extra={"accepts": "a name (refused beside `claimName`)",
                                                            "default_text": "the cluster's default class"})
    size: Bytes = Field(units.parse_memory("10Gi"), description="the size of the claim dynamo-lab creates",
                        json_schema_extra={"accepts": "memory, at least the model's disk size (refused beside "
                                           "`claimName`)"})
    # What the claim allows (for an existing claim: what it was created with). ReadWriteMany is
    # what Dynamo's model-caching guide uses; ReadWriteOnce lets one node mount it.
    access_mode: Literal["ReadWriteMany", "ReadWriteOnce"] = Field(
        "ReadWriteMany", description="the claim's access mode; for an existing claim, the mode it was created "
        "with", json_schema_extra={"accepts": "`ReadWriteMany`, or `ReadWriteOnce` when all workers run on one "
                                   "node"})

    @model_validator(mode="after")
    def _new_claim_keys_only_for_a_new_claim(self) -> "ModelCacheClaim":
        given = [alias for name, alias in (("storage_class", "storageClass"), ("size", "size"))
                 if name in self.model_fields_set]
        if self.claim_name is not None and given:
            verb = "describes" if len(given) == 1 else "describe"
            message = (f"{' and '.join(given)} {verb} a claim dynamo-lab creates, but claimName names an "
                       f"existing one, which it does not change. Remove {' and '.join(given)}, or remove "
                       "claimName to have a claim created")
            # One key given is the key to remove (fields.KeyProblem); two are the section's.
            raise KeyProblem(given[0], message) if len(given) == 1 else ValueError(message)
        return self


class PrePull(Section):
    """Job(s) that download the model into the cache, once per cache location, before the workers start."""

    enabled: bool = Field(True, description="download the model into each cache with a Job before the workers "
                          "start")
    # The whole Job, pulling the serving image on the node included.
    timeout_seconds: int = Field(1800, gt=0, description="the pre-pull Job's deadline, image pull included")


# Where a node keeps data of its own: the default cache's root and the usual mount points of data
# disks. A cache lies under one of them unless modelCache.allowedRoots says otherwise.
DATA_ROOTS = ("/var/lib/dynamo-lab", "/srv", "/data", "/mnt")
# A stack's node cache is `<hostPath>/dynamo-lab-cache.<graph namespace>`: the last component names
# this project, so that whatever namespace a stack picks (a DNS label: `bin`, `sudo`, `cron`), the
# directory the pre-pull makes group-writable is one no other software uses, never the node's own
# that shares the namespace's name under a widened allowedRoot (/home/ubuntu/bin, /var/lib/sudo,
# /var/spool/cron). A `.` cannot appear in a namespace, so no stack's namespace alone is such a
# name and two stacks' namespaces never give one directory. The prefix and a namespace's 63
# characters at most make 80, far under the 255 of a file name (Linux NAME_MAX).
NODE_CACHE_PREFIX = "dynamo-lab-cache."


class ModelCache(Section):
    """Where the workers' Hugging Face cache lives, so the model is fetched once per node, not per pod."""

    # The lab has two GPU nodes and no storage both can mount, so each node keeps its own copy in a
    # directory, which outlives `pulumi destroy`. nodeVolume (the default) reaches it through a
    # PersistentVolume per node that the stack creates, so the graph's pods mount only claims and its
    # namespace can enforce Pod Security baseline; hostPath mounts the directory into the pods, which
    # only a privileged namespace allows. off: every worker pod downloads the model; pvc: a
    # PersistentVolumeClaim. (YAML 1.1 readers turn an unquoted `off` into false: read false as off.)
    mode: Annotated[Literal["off", "nodeVolume", "hostPath", "pvc"],
                    BeforeValidator(lambda v: "off" if v is False else v)] = Field(
        "nodeVolume", description="where the workers' Hugging Face cache lives: a directory on each GPU node "
        "through a PersistentVolume per node (`nodeVolume`) or mounted directly (`hostPath`, needs a privileged "
        "namespace), a PersistentVolumeClaim (`pvc`), or nowhere (`off`: each pod downloads the model); see "
        "docs/model-cache.md",
        json_schema_extra={"accepts": "`nodeVolume`, `hostPath`, `pvc`, `off` (or `false`)"})
    # The directory on every GPU node that runs workers (absolute).
    host_path: str = Field("/var/lib/dynamo-lab/hf-cache", description="`nodeVolume` and `hostPath`: the directory "
                           "on each GPU node under which each stack keeps its own cache, `<hostPath>/dynamo-lab-cache."
                           "<graph namespace>`", json_schema_extra={
                               "accepts": "an absolute path without `..`; `<hostPath>/dynamo-lab-cache.<graph "
                                          "namespace>`, normalized, must lie under `allowedRoots` and outside "
                                          "the node's system, kubelet, container-runtime and CNI directories (see "
                                          "docs/model-cache.md)"})
    # The node directory is judged whole, after <hostPath>/dynamo-lab-cache.<namespace> is joined and
    # normalized (infra.validate): it must lie under one of these, and never in a directory of the
    # node's system, kubelet, container runtime or network plugin, whatever this list says.
    allowed_roots: list[str] = Field(
        list(DATA_ROOTS), description="`nodeVolume` and `hostPath`: the node directories a cache may lie under; "
        "add one to widen them (a system, kubelet, container-runtime or CNI directory stays refused)",
        json_schema_extra={"accepts": "absolute paths without `..`"})
    pvc: ModelCacheClaim = Field(ModelCacheClaim(), description="the claim of `mode: pvc`")
    pre_pull: PrePull = Field(PrePull(), description="the Job(s) that download the model into the cache")
