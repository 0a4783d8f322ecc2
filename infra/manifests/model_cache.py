"""Pure builder: where the model cache lives and how pods mount it (volume, mount, Hugging Face env).

The cache is a Hugging Face hub cache: a hostPath directory on each GPU node, or a
PersistentVolumeClaim, mounted at MOUNT. Workers read and write it through HF_HUB_CACHE, which
huggingface_hub (vLLM, transformers) and Dynamo's own hub code read before HF_HOME/hub; HF_HOME
would also put the Xet chunk cache (up to 10 GB) and the token file on the volume (docs/sources.md).
The frontend mounts it read-only where it can reach it, without the variable: it reads the config
and tokenizer files at the paths the workers publish, and falls back to its own cache and the Hub.
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


def volume(cfg: StackConfig, host_path_type: str = "Directory") -> dict[str, Any]:
    """The pod volume. Workers use a hostPath that must exist (the pre-pull Job makes it, writable)."""
    mc = cfg.model_cache
    if mc.mode == "hostPath":
        return {"name": VOLUME, "hostPath": {"path": mc.host_path, "type": host_path_type}}
    return {"name": VOLUME, "persistentVolumeClaim": {"claimName": cfg.model_cache_claim}}


def mount(read_only: bool = False) -> dict[str, Any]:
    return {"name": VOLUME, "mountPath": MOUNT, **({"readOnly": True} if read_only else {})}


def env() -> list[dict[str, str]]:
    return [{"name": ENV, "value": MOUNT}]


def frontend_shares(cfg: StackConfig) -> bool:
    """Whether the frontend mounts the cache: a hostPath (any node) or a claim every node can mount.
    A ReadWriteOnce claim would tie the frontend to the workers' node, or leave it unable to start."""
    mc = cfg.model_cache
    return mc.mode == "hostPath" or (mc.mode == "pvc" and mc.pvc.access_mode == "ReadWriteMany")


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
