"""Pure builder: the pre-pull Job(s) that download the model into the model cache before workers start.

One Job per cache: per GPU node that runs workers for a hostPath cache (placed with its class's
node affinity), one for a claim (on the workers' node when the claim is ReadWriteOnce, where a
local volume then binds). Each runs the serving image, which has huggingface_hub: an init
container (root) makes the cache directory writable by group 0, the group the image's non-root
user runs in, then `snapshot_download` fetches the weights, config and tokenizer files. Pulumi
waits for a Job to complete (no skipAwait annotation), and the graph waits for the Jobs. Names
carry a digest of what the Jobs run, so a changed model, image or cache downloads again.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from infra import names
from infra.manifests import JOB_LABEL, MODEL_PULL_JOB, digest_named, digest_suffix, model_cache, security
from infra.manifests.graph import HOSTNAME, node_affinity, with_hf_token
from infra.resolved import ResolvedStack

# What vLLM and the frontend read: safetensors weights, JSON config and tokenizer files, merges/vocab
# text, sentencepiece/tiktoken models, chat templates. Not *.bin/*.pth duplicates of the weights.
PATTERNS = ["*.safetensors", "*.json", "*.txt", "*.model", "*.tiktoken", "*.jinja"]
# argv: the model, its revision ("" for the default branch), the patterns.
SCRIPT = ("import sys; from huggingface_hub import snapshot_download; "
          "print(snapshot_download(sys.argv[1], revision=sys.argv[2] or None, allow_patterns=sys.argv[3:]))")
# The image runs as a non-root user in group 0; a directory the kubelet creates is root's, mode 0755.
PREPARE = (f"chgrp 0 {model_cache.MOUNT} && chmod g+rwxs {model_cache.MOUNT} "
           f"|| echo 'could not make {model_cache.MOUNT} writable by group 0' >&2")
# Downloading is network- and disk-bound; the memory covers the Xet client's buffers.
RESOURCES = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}}
# The Job controller labels each of its pods with the Job's name (Kubernetes 1.27 and later).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
PREPARE_RESOURCES = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "32Mi"}}


def placements(stack: ResolvedStack) -> dict[str, Optional[str]]:
    """Job key -> the GPU class whose node it runs on (None: anywhere). Empty: no pre-pull."""
    cfg, classes = stack.config, stack.worker_classes
    mc = cfg.model_cache
    if not model_cache.pre_pulled(cfg):
        return {}
    if model_cache.on_nodes(cfg):
        return {cls: cls for cls in classes}
    one_node = mc.pvc.access_mode == "ReadWriteOnce" and len(classes) == 1
    return {"claim": classes[0] if one_node else None}


def _name(stack: ResolvedStack, key: str, digest: str) -> str:
    slug = "" if key == "claim" else "-" + re.sub(r"[^a-z0-9-]+", "-", key.lower()).strip("-")
    tail = digest_suffix(digest)
    return f"{names.model_pull_base(stack.graph)}{slug}"[:names.LABEL_MAX - len(tail)].rstrip("-") + tail


def _job(stack: ResolvedStack, name: str, gpu_class: Optional[str]) -> dict[str, Any]:
    cfg = stack.config
    mount = model_cache.mount()
    pull = with_hf_token(cfg, security.container({
        "name": "pull", "image": cfg.image,
        "command": ["python3", "-c", SCRIPT, cfg.model.name, cfg.model.revision or "", *PATTERNS],
        "env": [{"name": model_cache.ENV, "value": model_cache.MOUNT}], "resources": RESOURCES,
        "volumeMounts": [mount],
    }))
    # No API call: no ServiceAccount token in the pod.
    pod: dict[str, Any] = {"restartPolicy": "Never", "automountServiceAccountToken": False, "containers": [pull],
                           "volumes": [model_cache.volume(stack, gpu_class, host_path_type="DirectoryOrCreate")]}
    if model_cache.on_nodes(cfg):
        # fsGroup does not apply to a hostPath (in the pod or behind a nodeVolume's PersistentVolume):
        # a root step makes the kubelet's directory writable by the image's group. Pod Security
        # baseline allows it (root, capabilities CHOWN and FOWNER only); restricted does not.
        pod["securityContext"] = security.pod()
        pod["initContainers"] = [{"name": "prepare-cache", "image": cfg.image, "command": ["sh", "-c", PREPARE],
                                  "securityContext": dict(security.PREPARE_AS_ROOT),
                                  "resources": PREPARE_RESOURCES, "volumeMounts": [mount]}]
    else:
        # A claim is made writable by fsGroup (the group the operator gives the graph's pods too).
        pod["securityContext"] = security.pod(fs_group=security.RUNTIME_UID)
    spec: dict[str, Any] = {"backoffLimit": 2, "activeDeadlineSeconds": cfg.model_cache.pre_pull.timeout_seconds}
    if gpu_class is not None:
        pod["affinity"] = node_affinity(cfg.gpu_classes[gpu_class].node_selector)
        nodes = cfg.gpu_classes[gpu_class].nodes if model_cache.on_nodes(cfg) else 1
        if nodes > 1:
            # A cache on each node of the class: one pod per node, kept apart by anti-affinity on the
            # Job's own pods (the Job controller labels them with its name).
            spec.update(completions=nodes, parallelism=nodes)
            pod["affinity"]["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {JOB_NAME_LABEL: name}}, "topologyKey": HOSTNAME}]}
    # A failed pull (a bad token, a Hub outage) is replaced by the next `pulumi up` instead of
    # blocking it: pulumi-kubernetes replaces an unready Job only with this annotation.
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": cfg.graph.namespace,
                         "annotations": {"pulumi.com/replaceUnready": "true"}},
            "spec": {**spec, "template": {"metadata": {"labels": {JOB_LABEL: MODEL_PULL_JOB}}, "spec": pod}}}


def _build(stack: ResolvedStack, digest: str) -> dict[str, dict[str, Any]]:
    return {key: _job(stack, _name(stack, key, digest), cls) for key, cls in placements(stack).items()}


def jobs(stack: ResolvedStack) -> dict[str, dict[str, Any]]:
    """Job key (the GPU class, or `claim`) -> Job, each named `<graph>-model-pull[-<class>]-<digest>`."""
    return digest_named(lambda digest: _build(stack, digest))
