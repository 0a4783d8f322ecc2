"""Pure builder: the in-cluster KV-transfer probe, as manifests, and what it moves (`ProbePlan`).

The probe moves one request's KV as the workers do (infra/payloads/kv_probe.py): the connector's
NIXL op, one descriptor per layer per block, scattered in pools laid out like the workers'. The
initiator Job is placed like the group that issues the op (decode for a READ, prefill for a WRITE),
the target Job like the other (same image, UCX env and node affinity, no GPU); both run the payload
from a ConfigMap, with a Service for the probe's control connection. The initiator prints its
result as one JSON line in its log. Every object is named from a digest of what the probe runs, so
a changed script or argument runs a new pair of Jobs on the next `pulumi up`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from infra import names, payloads, units
from infra.config.schema import Model, StackConfig, WorkerGroup
from infra.manifests import JOB_LABEL, KV_PROBE_JOB, digest_named, digest_suffix, kubectl, security
from infra.manifests.graph import node_affinity, worker_env
from infra.payloads import kv_probe
from infra.sizing import StackSizing, kv_block_bytes

PAYLOAD = "kv_probe.py"
MOUNT = "/probe"


def groups(cfg: StackConfig) -> tuple[WorkerGroup, WorkerGroup]:
    """(source, destination) of the KV: probe.fromGroup / toGroup, else the first prefill and decode groups."""
    by_name = {g.name: g for g in cfg.workers}

    def pick(name, role):
        return by_name[name] if name else next(g for g in cfg.workers if g.role == role)

    return pick(cfg.probe.from_group, "prefill"), pick(cfg.probe.to_group, "decode")


HEADROOM = units.GI  # Job memory above the registered pool: NIXL/UCX, Python and numpy


@dataclass(frozen=True)
class ProbePlan:
    """What the probe moves and registers; `source` holds the KV (prefill-like), `destination` gets it."""

    op: str  # READ: the destination side pulls; WRITE: the source side pushes
    pattern: str  # "blocks" (the workers') or "contiguous"
    nbytes: int
    layers: int
    block_bytes: int
    pool_blocks: dict[str, int]  # per layer, by side
    pool_basis: str

    @property
    def initiator(self) -> str:
        return "destination" if self.op == "READ" else "source"

    @property
    def target(self) -> str:
        return "source" if self.op == "READ" else "destination"

    def transfer(self, side: str) -> dict:
        """The payload's own arithmetic for one side: descriptors, bytes moved, pool bytes."""
        return kv_probe.plan(self.nbytes, self.pattern, self.layers, self.block_bytes, self.pool_blocks[side])

    def args(self, side: str) -> list[str]:
        return ["--bytes", str(self.nbytes), "--op", self.op, "--pattern", self.pattern,
                "--layers", str(self.layers), "--block-bytes", str(self.block_bytes),
                "--pool-blocks", str(self.pool_blocks[side])]


def plan_for(op: str, pattern: str, nbytes: int, model: Model, pools: dict[str, tuple[str, int]],
             max_pool: int) -> ProbePlan:
    """Each side's pool: its worker's (`pools`: side -> (group, bytes)) up to `max_pool`, never below
    one transfer."""
    block = kv_block_bytes(model)
    per_block = model.layers * block
    blocks = math.ceil(nbytes / per_block)
    sized = {side: max(blocks, min(size, max_pool) // per_block) for side, (_, size) in pools.items()}
    basis = "the workers' pools: " + " and ".join(f"{group}'s" for group, _ in pools.values())
    if any(size > max_pool for _, size in pools.values()):
        basis += f", capped at {units.human(max_pool)} (probe.maxPoolBytes)"
    return ProbePlan(op, pattern, nbytes, model.layers, block, sized, basis)


def stack_plan(cfg: StackConfig, sizing: StackSizing, op: Optional[str] = None, pattern: str = "blocks",
               nbytes: Optional[int] = None) -> ProbePlan:
    """The probe of this stack's KV path: by default the connector's op, the workers' block pattern and
    pools, and one average request's KV."""
    src, dst = groups(cfg)
    pools = {side: (g.name, sizing.group(g.name).kv_cache_bytes) for side, g in (("source", src),
                                                                               ("destination", dst))}
    return plan_for(op or src.kv_transfer.op, pattern, sizing.kv_bytes_per_request if nbytes is None else nbytes,
                    cfg.model, pools, cfg.probe.max_pool_bytes)


def _names(cfg: StackConfig, digest: str) -> dict[str, str]:
    base = names.probe_base(cfg.graph.name)
    tail = digest_suffix(digest)
    return {"configmap": f"{base}{tail}", **{role: f"{base}-{role}{tail}" for role in names.PROBE_ROLES}}


def _job(cfg: StackConfig, name: str, configmap: str, group: WorkerGroup, args: list[str],
         pool_bytes: int) -> dict[str, Any]:
    memory = units.to_mi_quantity(pool_bytes + HEADROOM)  # the registered pool + NIXL/UCX and Python
    container = security.container({
        "name": "probe", "image": cfg.image, "command": ["python3", f"{MOUNT}/{PAYLOAD}"], "args": args,
        "env": worker_env(group),
        "resources": {"requests": {"cpu": "1", "memory": memory}, "limits": {"memory": memory}},
        "volumeMounts": [{"name": "probe", "mountPath": MOUNT, "readOnly": True}],
    })
    pod = {
        "restartPolicy": "Never",
        "securityContext": security.pod(),
        "automountServiceAccountToken": False,  # no API call
        "affinity": node_affinity(cfg.gpu_classes[group.gpu_class].node_selector),
        "containers": [container],
        "volumes": [{"name": "probe", "configMap": {"name": configmap}}],
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        # Pulumi would otherwise wait for the Jobs to finish (and fail `up` with the probe).
        "metadata": {"name": name, "namespace": cfg.graph.namespace,
                     "annotations": {"pulumi.com/skipAwait": "true"}},
        # The result is the initiator's last log line (`probeLogs`); the Jobs, pods and logs go
        # ttlSecondsAfterFinished after they end.
        "spec": {"backoffLimit": 0, "activeDeadlineSeconds": cfg.probe.timeout_seconds,
                 "ttlSecondsAfterFinished": cfg.probe.ttl_seconds_after_finished,
                 "template": {"metadata": {"labels": {"app.kubernetes.io/name": name, JOB_LABEL: KV_PROBE_JOB}},
                              "spec": pod}},
    }


def _build(cfg: StackConfig, plan: ProbePlan, payload: str, digest: str) -> dict[str, dict[str, Any]]:
    n = _names(cfg, digest)
    src, dst = groups(cfg)
    side_group = {"source": src, "destination": dst}
    port, timeout = str(cfg.probe.port), str(cfg.probe.timeout_seconds)
    service_host = f"{n['target']}.{cfg.graph.namespace}.svc.cluster.local"

    def job(role: str, side: str, args: list[str]) -> dict[str, Any]:
        return _job(cfg, n[role], n["configmap"], side_group[side], args + plan.args(side) + ["--timeout", timeout],
                    plan.transfer(side)["pool_bytes"])

    return {
        "configmap": {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": n["configmap"], "namespace": cfg.graph.namespace},
                      "data": {PAYLOAD: payload}},
        "service": {"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": n["target"], "namespace": cfg.graph.namespace},
                    "spec": {"selector": {"app.kubernetes.io/name": n["target"]},
                             "ports": [{"name": "control", "port": cfg.probe.port,
                                        "targetPort": cfg.probe.port}]}},
        "target": job("target", plan.target, ["target", "--port", port]),
        "initiator": job("initiator", plan.initiator, ["initiator", "--connect", f"{service_host}:{port}",
                                                       "--repeats", str(cfg.probe.repeats)]),
    }


@dataclass(frozen=True)
class ProbeObjects:
    """What the in-cluster probe deploys: its code, the target's Service and the two Jobs."""

    configmap: dict[str, Any]
    service: dict[str, Any]
    target: dict[str, Any]
    initiator: dict[str, Any]


def manifests(cfg: StackConfig, sizing: StackSizing) -> ProbeObjects:
    """ConfigMap, Service and the two Jobs, all named `<graph>-kv-probe[-role]-<digest>` (the digest
    of the four as JSON, so a changed probe is new Jobs)."""
    plan, payload = stack_plan(cfg, sizing), payloads.source(PAYLOAD)
    return ProbeObjects(**digest_named(lambda digest: _build(cfg, plan, payload, digest)))


def logs_command(cfg: StackConfig, initiator_job: str) -> str:
    """The stack output probeLogs: the command printing the probe's result, the initiator's last log
    line. No pipe, no quotes: it runs as `eval "$(pulumi stack output probeLogs)"` and as `$(...)`."""
    return f"{kubectl(cfg.target)} logs -n {cfg.graph.namespace} job/{initiator_job} --tail=1"
