"""Pure builder: where the model cache lives and how pods mount it (volume, mount, Hugging Face env).

The cache is a Hugging Face hub cache: a hostPath directory on each GPU node, or a
PersistentVolumeClaim, mounted at MOUNT. Workers read and write it through HF_HUB_CACHE, which
huggingface_hub (vLLM, transformers) and Dynamo's own hub code read before HF_HOME/hub; HF_HOME
would also put the Xet chunk cache (up to 10 GB) and the token file on the volume (docs/sources.md).
Once the pre-pull Jobs filled the cache, the workers run with HF_HUB_OFFLINE=1: vLLM and transformers
otherwise still ask the Hub at start, and a Hub outage or a moved branch would stop or change them.
The frontend mounts nothing: it fetches the config and tokenizer from a worker (Dynamo's
self-hosted metadata).
"""

from __future__ import annotations

from typing import Any, Optional

from infra import units
from infra.config.schema import StackConfig
from infra.manifests import match_expressions
from infra.resolved import ResolvedStack

VOLUME = "model-cache"
MOUNT = "/cache/huggingface/hub"
ENV = "HF_HUB_CACHE"


def enabled(cfg: StackConfig) -> bool:
    return cfg.model_cache.mode != "off"


def on_nodes(cfg: StackConfig) -> bool:
    """Whether the cache is a directory on each GPU node (nodeVolume or hostPath): one per GPU class."""
    return cfg.model_cache.mode in ("nodeVolume", "hostPath")


def volume(stack: ResolvedStack, gpu_class: Optional[str], host_path_type: str = "Directory") -> dict[str, Any]:
    """The pod volume of a pod on `gpu_class`'s node (None: a pod on any node, for a claim). A hostPath
    is the stack's own directory (ResolvedStack.node_cache_directory, the one infra.validate judged) and
    must exist for the workers (the pre-pull Job makes it, writable)."""
    mc = stack.config.model_cache
    if mc.mode == "hostPath":
        return {"name": VOLUME, "hostPath": {"path": stack.node_cache_directory, "type": host_path_type}}
    if mc.mode == "nodeVolume":
        if gpu_class is None:
            raise ValueError("a nodeVolume cache is per GPU class: name the class")
        return {"name": VOLUME, "persistentVolumeClaim": {"claimName": stack.node_cache_claim(gpu_class)}}
    return {"name": VOLUME, "persistentVolumeClaim": {"claimName": stack.model_cache_claim}}


def node_volumes(stack: ResolvedStack, nbytes: int) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """nodeVolume: per GPU class with workers, a PersistentVolume on its node's directory and the claim
    bound to it. The volume is a hostPath the kubelet creates (DirectoryOrCreate), placed on the node
    by the class's node affinity; Retain keeps the files when the stack is destroyed. The pods mount
    the claim, which Pod Security baseline allows, where a hostPath volume needs privileged."""
    cfg = stack.config
    if cfg.model_cache.mode != "nodeVolume":
        return {}
    size = units.to_mi_quantity(nbytes)
    out = {}
    for cls in stack.worker_classes:
        pv, claim = stack.node_cache_volume(cls), stack.node_cache_claim(cls)
        terms = [{"matchExpressions": match_expressions(cfg.gpu_classes[cls].node_selector)}]
        out[cls] = (
            {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
             "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                      "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "", "volumeMode": "Filesystem",
                      "hostPath": {"path": stack.node_cache_directory, "type": "DirectoryOrCreate"},
                      "nodeAffinity": {"required": {"nodeSelectorTerms": terms}},
                      "claimRef": {"namespace": cfg.graph.namespace, "name": claim}}},
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": claim, "namespace": cfg.graph.namespace},
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv,
                      "resources": {"requests": {"storage": size}}}})
    return out


def mount(read_only: bool = False) -> dict[str, Any]:
    return {"name": VOLUME, "mountPath": MOUNT, **({"readOnly": True} if read_only else {})}


def pre_pulled(cfg: StackConfig) -> bool:
    """Whether pre-pull Jobs fill the cache before the workers start (the graph waits for them)."""
    return enabled(cfg) and cfg.model_cache.pre_pull.enabled


def env(cfg: StackConfig) -> list[dict[str, str]]:
    """The workers' Hugging Face env: the cache, and no Hub calls once it is pre-pulled."""
    out = [{"name": ENV, "value": MOUNT}]
    if pre_pulled(cfg):
        out.append({"name": "HF_HUB_OFFLINE", "value": "1"})
    return out


def claim(stack: ResolvedStack) -> Optional[dict[str, Any]]:
    """The PersistentVolumeClaim dynamo-lab creates; None for a hostPath cache or an existing claim.

    A plain Kubernetes object, not the DynamoGraphDeployment's: v1beta1 has no `spec.pvcs` (only
    the deprecated v1alpha1 does), and the pre-pull Job must mount the claim before the graph exists.
    """
    if not stack.creates_model_cache_claim:
        return None
    mc = stack.config.model_cache
    spec: dict[str, Any] = {"accessModes": [mc.pvc.access_mode],
                            "resources": {"requests": {"storage": units.to_mi_quantity(mc.pvc.size)}}}
    if mc.pvc.storage_class is not None:
        spec["storageClassName"] = mc.pvc.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": stack.model_cache_claim, "namespace": stack.namespace}, "spec": spec}
