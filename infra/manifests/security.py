"""Pure builder: what every pod and container a stack deploys may do, and the Pod Security level
of the namespaces it creates.

Every container runs as a non-root user, cannot gain privileges, keeps no Linux capability and runs
under the runtime's default seccomp profile: what Pod Security `restricted` requires (Kubernetes,
"Pod Security Standards"). The one exception is the node model cache's preparation step, which
must run as root (see `PREPARE_AS_ROOT` and `pod_security_level`).

Workers that move their KV over RDMA are no exception: they add no capability. IPC_LOCK, which lets
a process pin memory beyond RLIMIT_MEMLOCK (Linux, drivers/infiniband/core/umem.c, ib_umem_get),
could not take effect in them: they run as uid 1000 with allowPrivilegeEscalation false, so across
execve only ambient capabilities would survive (capabilities(7)), and containerd's CRI clears those
in every container (v2.2.0, internal/cri/server/container_create.go, WithoutAmbientCaps, citing
kubernetes/kubernetes#56374); a Pod has no field to ask for them (KEP-2763, provisional). What UCX
needs is a memlock limit high enough, which a container inherits from its runtime and a Kubernetes
1.34 Pod cannot set, and the RDMA device nodes, which the device plugin's resource brings and Pod
Security does not judge (docs/security.md, "RDMA workers").
"""

from __future__ import annotations

from typing import Any, Literal

from infra.config.schema import StackConfig

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
# The node cache's init container (nodeVolume, hostPath): chgrp/chmod of a directory the kubelet
# created as root.
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


# What the graph namespace enforces, and why, by modelCache.mode; every other mode: restricted.
LEVELS: dict[str, tuple[PodSecurityLevel, str]] = {
    # A hostPath volume in a pod is allowed only at privileged.
    "hostPath": ("privileged", "the model cache is a hostPath volume in the pods, which baseline already refuses"),
    # A node directory behind a PersistentVolume keeps the pods at baseline: only the cache's
    # preparation step runs as root.
    "nodeVolume": ("baseline", "the model cache's preparation step runs as root (restricted refuses it, baseline "
                               "allows it)"),
}
RESTRICTED = ("restricted", "every pod of the stack meets restricted")


def _level(cfg: StackConfig) -> tuple[PodSecurityLevel, str]:
    # Only the model cache decides it: no other pod of the graph asks for more than restricted,
    # RDMA workers included.
    return LEVELS.get(cfg.model_cache.mode, RESTRICTED)


def pod_security_level(cfg: StackConfig) -> PodSecurityLevel:
    """What the graph namespace can enforce with this stack's pods (LEVELS)."""
    return _level(cfg)[0]


def level_reason(cfg: StackConfig) -> str:
    """Why pod_security_level is what it is, in a sentence."""
    return _level(cfg)[1]


ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"


def namespace_labels(level: PodSecurityLevel) -> dict[str, str]:
    """Pod Security admission labels: enforce `level`, and warn and audit at `restricted`, so
    anything short of it is reported even where it is allowed."""
    out = {ENFORCE_LABEL: level, f"{ENFORCE_LABEL}-version": PSA_VERSION}
    for mode in ("warn", "audit"):
        out[f"pod-security.kubernetes.io/{mode}"] = "restricted"
        out[f"pod-security.kubernetes.io/{mode}-version"] = PSA_VERSION
    return out
