"""The sizing's formulas, each small and separately testable: a KV block, host memory floors, pool
blocks, transfer time, link and same-node throughput, the prefill estimate, a GPU's budget."""

from __future__ import annotations

import math
from typing import Optional

from infra import prefix_cache, units
from infra.catalogue import SAME_NODE_BYTES_PER_SECOND
from infra.config.schema import GpuClass, Link, Model, SizingParameters
from infra.resolved import kv_bytes_per_token
from infra.sizing.report import KvLayout, ThroughputBasis


def host_memory_floor(base: int, kv_pool: int, headroom_percent: float, cpu_buffers: bool) -> int:
    """Host RSS a worker reaches at worst, rounded up to whole MiB (it becomes the pod's limit).
    Without CPU buffers there is no mirror: the base alone."""
    if not cpu_buffers:
        return units.ceil_mi(base)
    return units.ceil_mi(base + kv_pool * (1 + headroom_percent / 100))


def largest_pool_for_limit(limit: int, base: int, headroom_percent: float) -> int:
    """Inverse of host_memory_floor: the biggest KV pool whose mirror fits under `limit` (MiB-aligned)."""
    # The floor is rounded up to whole MiB, so it fits `limit` only below limit's last whole MiB.
    room = (limit // units.MI * units.MI - base) / (1 + headroom_percent / 100)
    return max(0, math.floor(room / units.MI) * units.MI)


def transfer_seconds(nbytes: int, bytes_per_second: float) -> float:
    return nbytes / bytes_per_second


def link_bytes_per_second(link: Link) -> float:
    """Payload a network link carries: its rate in bytes/s times its efficiency (1GbE: 115 MB/s)."""
    return link.rate / 8 * link.efficiency


def link_basis(link: Link) -> str:
    return f"link {link.rate / 1e9:g} Gbit/s x {link.efficiency:g} efficiency"


# The default same-node figure was measured on a development machine, not the lab (docs/measurements.md).
SAME_NODE_DEFAULT = "same-node NIXL {op} of KV blocks (dev-machine estimate)"


def path_throughput(s: SizingParameters, path: str, op: str, link: Optional[Link] = None,
                    transport: str = "tcp", flows: int = 1) -> tuple[float, str, ThroughputBasis]:
    """Bytes/s of one KV transfer by NIXL `op` on `path` ("same-node" or "cross-node") over `transport`
    ("tcp" or "rdma"), its basis in words and as a kind.

    The one rule the sizing and the probe's prediction share. On one node the op matters (a READ
    of scattered blocks is slower than a WRITE, docs/measurements.md); across a 1GbE link the link
    decides, whatever the op. `link` replaces `s.link` (the probe's shaped rate). `flows`: the
    rank-to-rank reads one transfer takes at once (tensorParallel above 1: infra/kv_ranks.py), each
    between its own pair of NIXL agents (its ranks' processes), so over TCP each its own software
    path: ESTIMATE (measured for one agent pair only, whose flows share one path: docs/measurements.md).
    """
    if transport == "rdma":
        # ESTIMATE (unmeasured here): UCX over RC verbs moves the KV by the NIC, without the host's TCP
        # stack; on one node too, since two pods reach each other through the NIC (cuda_ipc and shared
        # memory do not cross pods). The link decides.
        link = link or s.link
        return (link_bytes_per_second(link), f"{link_basis(link)} (UCX over RDMA, an ESTIMATE)",
                ThroughputBasis.LINK)
    software = _rank_pairs(tcp_software_path(s, op), flows)
    if path == "same-node":
        return software
    link = link or s.link
    if link_bytes_per_second(link) > software[0]:
        # UCX over TCP moves a flow no faster than the host's TCP software path, whatever the wire:
        # a 100 Gbit/s link (11.5 GB/s of payload) still carries a READ at the same-node figure.
        bps, source, basis = software
        return bps, f"{source}, under the {link_basis(link)} (UCX over TCP)", basis
    return link_bytes_per_second(link), link_basis(link), ThroughputBasis.LINK


def _rank_pairs(software: tuple[float, str, ThroughputBasis], flows: int) -> tuple[float, str, ThroughputBasis]:
    """The TCP software path of `flows` rank pairs side by side (path_throughput)."""
    if flows == 1:
        return software
    bps, source, basis = software
    return flows * bps, f"{flows} rank pairs side by side (an ESTIMATE), each {source}", basis


def tcp_software_path(s: SizingParameters, op: str) -> tuple[float, str, ThroughputBasis]:
    """What NIXL over UCX TCP moves through one host's TCP stack (measured on loopback): the
    same-node throughput, and the cap of one flow on any link."""
    if s.same_node_bytes_per_second is not None:
        return (float(s.same_node_bytes_per_second), "same-node (sizing.sameNodeBytesPerSecond)",
                ThroughputBasis.CONFIGURED)
    return float(SAME_NODE_BYTES_PER_SECOND[op]), SAME_NODE_DEFAULT.format(op=op), ThroughputBasis.ESTIMATE


def kv_block_bytes(m: Model) -> int:
    """Bytes of one layer's KV block, the unit vLLM's NIXL connectors move (Qwen3-0.6B: 64 KiB)."""
    return kv_bytes_per_token(1, m.kv_heads, m.head_dim, m.dtype_bytes) * prefix_cache.BLOCK_TOKENS


def kv_layout(m: Model, prompt_tokens: int) -> KvLayout:
    per_layer = kv_block_bytes(m)
    return KvLayout(block_size_tokens=prefix_cache.BLOCK_TOKENS, descriptor_bytes=per_layer, layers=m.layers,
                    block_bytes=per_layer * m.layers,
                    descriptors_per_request=prefix_cache.blocks(prompt_tokens) * m.layers)


def prefill_flops_per_second(cls: GpuClass) -> float:
    """FLOP/s a prefill sustains on one GPU (one rank) of this class: the class's `effectiveTflops`
    (a worker of several ranks: Ranks.together). The one prefill efficiency (effectiveTflops / peakTflops, at most
    1): the sizing's prefill estimate and the predictor's prefill steps (dynamo_lab/predict/costs.py)
    both read it here, so neither runs prefill at a fraction of its own."""
    return cls.effective_tflops * 1e12


def prefill_seconds_estimate(m: Model, tokens: int, flops_per_second: float) -> float:
    """ESTIMATE: forward-pass FLOPs ~= 2 x the parameters each token multiplies through x tokens, plus
    the LM head once for the last token (Model.token_parameters, head_parameters; attention left
    out), at the class's sustained prefill rate (prefill_flops_per_second)."""
    return 2 * (m.token_parameters * tokens + m.head_parameters) / flops_per_second


def blocks_for_sequence(tokens: int) -> int:
    """Pool blocks one sequence of `tokens` needs in vLLM: its blocks, plus the null block the block
    pool holds back (vllm/v1/core/block_pool.py: block 0 is never handed out)."""
    return prefix_cache.blocks(tokens) + 1


def gpu_budget(cls: GpuClass, memory: Optional[int] = None) -> int:
    """What the workers sharing a class's GPU may plan to use: its memory (or `memory`, what a node's
    GPU reports) less the class's reserve."""
    return math.floor((cls.memory if memory is None else memory) * (1 - cls.memory_reserve))
