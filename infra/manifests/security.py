"""Pure builder: what every pod and container a stack deploys may do, and the Pod Security level
of the namespaces it creates.

Every container runs as a non-root user, cannot gain privileges, keeps no Linux capability and runs
under the runtime's default seccomp profile: what Pod Security `restricted` requires (Kubernetes,
"Pod Security Standards"). The one exception is the hostPath model cache's preparation step, which
must run as root (see `PREPARE_AS_ROOT` and `pod_security_level`).
"""

from __future__ import annotations

from typing import Any, Literal

from infra.config.models import StackConfig

# The Dynamo vLLM runtime image's user: `useradd -u 1000 -g 0`, `USER dynamo`
# (container/templates/vllm_runtime.Dockerfile; docs/sources.md). runAsNonRoot alone cannot be
# checked against a user given by name, so the uid is written out.
RUNTIME_UID, RUNTIME_GID = 1000, 0
# The benchmark's python image runs as root by default; it runs as nobody here, installing AIPerf
# into its own writable home.
BENCHMARK_UID = 65534

PodSecurityLevel = Literal["privileged", "baseline", "restricted"]
PSA_VERSION = "v1.34"  # the lab's Kubernetes; newer rules do not apply to it unasked

CONTAINER: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
# The hostPath cache's init container: chgrp/chmod of a directory the kubelet created as root.
PREPARE_AS_ROOT: dict[str, Any] = {"runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
                                   "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}}


def pod(uid: int = RUNTIME_UID, gid: int = RUNTIME_GID, fs_group: int | None = None) -> dict[str, Any]:
    """A pod's securityContext: non-root `uid`, the runtime's default seccomp profile."""
    out: dict[str, Any] = {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": gid,
                           "seccompProfile": {"type": "RuntimeDefault"}}
    if fs_group is not None:
        out["fsGroup"] = fs_group
    return out


def container(extra: dict[str, Any]) -> dict[str, Any]:
    """`extra` (a container) with the restricted container securityContext."""
    return {**extra, "securityContext": dict(CONTAINER)}


def pod_security_level(cfg: StackConfig) -> PodSecurityLevel:
    """What the graph namespace can enforce with this stack's pods.

    A hostPath volume in a pod (`modelCache.mode: hostPath`) is allowed only at `privileged`:
    `baseline` already forbids it. A directory on the node reached through a PersistentVolume
    (`nodeVolume`) keeps the pods at `baseline`: only the cache's preparation step runs as root.
    Every other pod meets `restricted`.
    """
    return {"hostPath": "privileged", "nodeVolume": "baseline"}.get(cfg.model_cache.mode, "restricted")


# Why the graph namespace enforces the level it does, by modelCache.mode (pod_security_level).
LEVEL_REASONS = {
    "hostPath": "the model cache is a hostPath volume in the pods, which baseline already refuses",
    "nodeVolume": "the model cache's preparation step runs as root (restricted refuses it, baseline allows it)",
}
RESTRICTED_REASON = "every pod of the stack meets restricted"


def level_reason(cfg: StackConfig) -> str:
    return LEVEL_REASONS.get(cfg.model_cache.mode, RESTRICTED_REASON)


ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"


def namespace_labels(level: PodSecurityLevel) -> dict[str, str]:
    """Pod Security admission labels: enforce `level`, and warn and audit at `restricted`, so
    anything short of it is reported even where it is allowed."""
    out = {ENFORCE_LABEL: level, f"{ENFORCE_LABEL}-version": PSA_VERSION}
    for mode in ("warn", "audit"):
        out[f"pod-security.kubernetes.io/{mode}"] = "restricted"
        out[f"pod-security.kubernetes.io/{mode}-version"] = PSA_VERSION
    return out
