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
from infra.config.models import StackConfig

VOLUME = "model-cache"
MOUNT = "/cache/huggingface/hub"
ENV = "HF_HUB_CACHE"


def enabled(cfg: StackConfig) -> bool:
    return cfg.model_cache.mode != "off"


def host_directory(cfg: StackConfig) -> str:
    """The stack's own directory under modelCache.hostPath, named after its graph namespace: no other
    stack's Jobs write into it."""
    return f"{cfg.model_cache.host_path.rstrip('/')}/{cfg.graph.namespace}"


def volume(cfg: StackConfig, host_path_type: str = "Directory") -> dict[str, Any]:
    """The pod volume. Workers use a hostPath that must exist (the pre-pull Job makes it, writable)."""
    mc = cfg.model_cache
    if mc.mode == "hostPath":
        return {"name": VOLUME, "hostPath": {"path": host_directory(cfg), "type": host_path_type}}
    return {"name": VOLUME, "persistentVolumeClaim": {"claimName": cfg.model_cache_claim}}


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


def claim(cfg: StackConfig) -> Optional[dict[str, Any]]:
    """The PersistentVolumeClaim dynamo-lab creates; None for a hostPath cache or an existing claim.

    A plain Kubernetes object, not the DynamoGraphDeployment's: v1beta1 has no `spec.pvcs` (only
    the deprecated v1alpha1 does), and the pre-pull Job must mount the claim before the graph exists.
    """
    if not cfg.creates_model_cache_claim:
        return None
    mc = cfg.model_cache
    spec: dict[str, Any] = {"accessModes": [mc.pvc.access_mode],
                            "resources": {"requests": {"storage": units.to_mi_quantity(mc.pvc.size)}}}
    if mc.pvc.storage_class is not None:
        spec["storageClassName"] = mc.pvc.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": cfg.model_cache_claim, "namespace": cfg.graph.namespace}, "spec": spec}
