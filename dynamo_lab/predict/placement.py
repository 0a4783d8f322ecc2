"""Where a stack's workers run in the simulation (cells.topology): each replica on a node of its
class and a GPU of that node, and the KV paths between the nodes.

A class of one node of one GPU (the lab's) keeps the names it always had: its node and its GPU are
the class's name, so the lab's predictions are the same figures. On a class of several nodes each
replica goes where the one placement model expects it (infra/placement/: the node the scheduler's
default scoring would pick among those its group's spread allows, with whole GPUs one with its
tensorParallel GPUs free), and its node is named as the model names a planned node, "gpu-80gb node
1 of 2" (Placement.node_name: which real node that is, the scheduler decides). So a prefill and a
decode replica of one node share its host's TCP path, and those on two nodes the link between them.
Time-sliced workers on a node take its GPUs in turn and share each by processor sharing; whole-GPU
workers own theirs, so no two share.

Paths per node pair: on one node over TCP (CPU buffers), the host's own TCP software path,
never the NIC: every same-node flow of the host, whichever prefill/decode pair it joins, goes
through it, in the order posted, `parallelism` of them at a time at the software path's rate
(params.LabParams.host_transfer_parallelism; docs/measurements.md, "Several flows at once": the
path is CPU-bound, and several flows did not widen it). Across two nodes every flow between them
shares the link (rate x efficiency), each flow at most the TCP software path over TCP, at the
link's rate over RDMA (no host TCP stack: the sizing's path_throughput, one rule for both). Over
RDMA on one node the pair goes through the NIC too (path_throughput): two pods cannot use CUDA IPC
or NVLink between them (Dynamo 1.x's "Disaggregated Inference Communication Guide": each pod sees
only its own GPUs, and UCX's cuda_ipc refuses a peer in another PID namespace), so the NIC loops
the KV back, shared by the node's flows. A measured throughput (sizing.measured) replaces the
path's per-flow rate, as the sizing takes it. Between workers of tensorParallel above 1 a transfer
is the sizing's rank reads side by side (infra/kv_ranks.py), each a flow of its own on the path
(PathSpec.rank_flows).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from dynamo_lab.predict import costs, params
from dynamo_lab.predict.specs import PathSpec, WorkerSpec
from infra.config.schema import StackConfig
from infra.placement import Placement, Replica
from infra.resolved import ranks
from infra.sizing import StackSizing, link_bytes_per_second, path_throughput
from infra.sizing.formulas import tcp_software_path


def _gpu_name(cfg: StackConfig, placed: Placement, r: Replica) -> str:
    """The simulation's name of a replica's GPUs: the class's own where it has one GPU in all."""
    cls = cfg.gpu_classes[r.gpu_class]
    node = placed.node_name(r.gpu_class, r.node)
    if cls.sharing == "whole":
        first, last = r.gpus[0], r.gpus[-1]
        return f"{node} GPU {first}" if first == last else f"{node} GPUs {first}-{last}"
    return r.gpu_class if cls.nodes == 1 and cls.gpus_per_node == 1 else f"{node} GPU {r.gpus[0]}"


def workers(cfg: StackConfig, sizing: StackSizing, pool_scale: float = 1.0) -> list[WorkerSpec]:
    """One WorkerSpec per replica, where infra/placement/ expects it (this module's docstring)."""
    cards = costs.cards(cfg)
    specs = []
    placed = Placement.of(cfg)
    for r in placed.replicas:
        g = r.group
        cls = cfg.gpu_classes[g.gpu_class]
        pool = int(sizing.group(g.name).kv_cache_bytes * pool_scale)
        # The pool is per rank, and a rank holds its share of the KV heads (the sizing's rule).
        rank = ranks(cfg, g)
        blocks = rank.pool_blocks(pool)
        card = costs.tensor_parallel(cards[g.gpu_class], g.tensor_parallel, params.ALLREDUCE_BYTES_PER_S,
                                     params.ALLREDUCE_LATENCY_S)
        specs.append(WorkerSpec(r.name, g.role, _gpu_name(cfg, placed, r), placed.node_name(g.gpu_class, r.node), card,
                                costs.limits(g, cls), blocks, rank.kv_bytes_per_token, g.cpu_buffers, group=g.name))
    return specs


def paths(cfg: StackConfig, sizing: StackSizing, specs: list[WorkerSpec],
          parallelism: float = params.LAB.host_transfer_parallelism) -> dict:
    """The KV paths between the nodes the prefill and decode workers are on (this module's
    docstring); `parallelism`: how many flows a host's TCP software path moves at once."""
    nodes_of: dict[str, set] = defaultdict(set)
    for s in specs:
        nodes_of[s.group].add(s.node)
    flows = tuple((t.from_group, t.to_group, len(t.rank_reads)) for t in sizing.transfers if len(t.rank_reads) > 1)
    out = {}
    for t in sizing.transfers:
        for pn in sorted(nodes_of[t.from_group]):
            for dn in sorted(nodes_of[t.to_group]):
                out[(pn, dn)] = replace(_path(cfg, t, pn == dn, t.transport, parallelism), rank_flows=flows)
    return out


def _path(cfg: StackConfig, t, same: bool, transport: str, parallelism: float) -> PathSpec:
    s = cfg.sizing
    if transport == "rdma":
        bps = (t.throughput_bytes_per_s if t.throughput_basis == "measured"
               else path_throughput(s, "same-node" if same else "cross-node", t.op, transport="rdma")[0])
        return PathSpec(capacity=bps, per_flow=bps)
    software = t.throughput_bytes_per_s if t.throughput_basis == "measured" else tcp_software_path(s, t.op)[0]
    if same:
        return PathSpec(capacity=parallelism * software, per_flow=software, in_order=True)
    if t.throughput_basis == "measured":
        return PathSpec(capacity=software, per_flow=software)
    # One flow moves at most the TCP software path (or the link where that is slower); all of a
    # node pair's flows share the link.
    return PathSpec(capacity=link_bytes_per_second(s.link), per_flow=software)
