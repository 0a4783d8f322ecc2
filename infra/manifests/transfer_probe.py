"""Pure builder: the in-cluster KV-transfer probe, as manifests.

A target Job placed like the decode group and an initiator Job placed like the prefill group (same
image, UCX env and node affinity, no GPU), both running the `kv_probe.py` payload from a ConfigMap,
and a Service for the probe's control connection. The initiator prints its result as one JSON line
in its log. Every object is named from a digest of what the probe runs, so a changed script or
argument runs a new pair of Jobs on the next `pulumi up`.
"""

from __future__ import annotations

from typing import Any

from infra import payloads, units
from infra.config.models import StackConfig, WorkerGroup
from infra.manifests import content_hash
from infra.manifests.graph import node_affinity, worker_env

PAYLOAD = "kv_probe.py"
MOUNT = "/probe"


def groups(cfg: StackConfig) -> tuple[WorkerGroup, WorkerGroup]:
    """(initiator side, target side): the configured groups, else the first prefill and decode groups."""
    by_name = {g.name: g for g in cfg.workers}

    def pick(name, role):
        return by_name[name] if name else next(g for g in cfg.workers if g.role == role)

    return pick(cfg.probe.from_group, "prefill"), pick(cfg.probe.to_group, "decode")


def _names(cfg: StackConfig, digest: str) -> dict[str, str]:
    base = f"{cfg.graph.name}-kv-probe"
    tail = f"-{digest}" if digest else ""
    return {"configmap": f"{base}{tail}", "target": f"{base}-target{tail}",
            "initiator": f"{base}-initiator{tail}"}


def _job(cfg: StackConfig, name: str, configmap: str, group: WorkerGroup, args: list[str],
         nbytes: int) -> dict[str, Any]:
    memory = units.to_mi_quantity(nbytes + units.GI)  # the buffer + NIXL/UCX and Python
    container = {
        "name": "probe", "image": cfg.image, "command": ["python3", f"{MOUNT}/{PAYLOAD}"], "args": args,
        "env": worker_env(group),
        "resources": {"requests": {"cpu": "1", "memory": memory}, "limits": {"memory": memory}},
        "volumeMounts": [{"name": "probe", "mountPath": MOUNT, "readOnly": True}],
    }
    pod = {
        "restartPolicy": "Never",
        "affinity": node_affinity(cfg.gpu_classes[group.gpu_class].node_selector),
        "containers": [container],
        "volumes": [{"name": "probe", "configMap": {"name": configmap}}],
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        # Pulumi would otherwise wait for the Jobs to finish (and fail `up` with the probe).
        "metadata": {"name": name, "namespace": cfg.graph.namespace,
                     "annotations": {"pulumi.com/skipAwait": "true"}},
        "spec": {"backoffLimit": 0, "activeDeadlineSeconds": cfg.probe.timeout_seconds,
                 "template": {"metadata": {"labels": {"app.kubernetes.io/name": name}}, "spec": pod}},
    }


def _build(cfg: StackConfig, nbytes: int, digest: str) -> dict[str, dict[str, Any]]:
    n = _names(cfg, digest)
    src, dst = groups(cfg)
    port, timeout = str(cfg.probe.port), str(cfg.probe.timeout_seconds)
    service_host = f"{n['target']}.{cfg.graph.namespace}.svc.cluster.local"
    return {
        "configmap": {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": n["configmap"], "namespace": cfg.graph.namespace},
                      "data": {PAYLOAD: payloads.source(PAYLOAD)}},
        "service": {"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": n["target"], "namespace": cfg.graph.namespace},
                    "spec": {"selector": {"app.kubernetes.io/name": n["target"]},
                             "ports": [{"name": "control", "port": cfg.probe.port,
                                        "targetPort": cfg.probe.port}]}},
        "target": _job(cfg, n["target"], n["configmap"], dst,
                       ["target", "--port", port, "--bytes", str(nbytes), "--timeout", timeout], nbytes),
        "initiator": _job(cfg, n["initiator"], n["configmap"], src,
                          ["initiator", "--connect", f"{service_host}:{port}", "--bytes", str(nbytes),
                           "--repeats", str(cfg.probe.repeats), "--timeout", timeout], nbytes),
    }


def manifests(cfg: StackConfig, nbytes: int) -> dict[str, dict[str, Any]]:
    """ConfigMap, Service and the two Jobs, all named `<graph>-kv-probe[-role]-<digest>`."""
    return _build(cfg, nbytes, content_hash(_build(cfg, nbytes, "")))


def logs_command(cfg: StackConfig, initiator_job: str) -> str:
    return f"kubectl logs -n {cfg.graph.namespace} job/{initiator_job} | tail -n 1"
