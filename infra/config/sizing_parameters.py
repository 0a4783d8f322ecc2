"""`sizing`: the sizing's parameters (host memory, GPU overhead, transfer rates, the link, measurements)."""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from infra import units
from infra.catalogue import SAME_NODE_BYTES_PER_SECOND
from infra.config.base import Section
from infra.config.fields import Bytes, LinkRate, Throughput


class Link(Section):
    rate: LinkRate = Field(units.parse_rate_bits("1gbit"), description="the cross-node link's rate")
    # 1GbE carries 110-117 MB/s of payload in practice (docs/lab.md): 0.92 x 125 MB/s = 115 MB/s.
    # The probe over a veth shaped to 1 Gbit/s (2026-11-30) moved the workers' block READs and
    # WRITEs at 118-121 MB/s, one contiguous region at 115-121 MB/s: the link decides, not the op
    # or pattern, and 115 MB/s stays within 5% (docs/measurements.md).
    efficiency: float = Field(0.92, gt=0, le=1, description="the fraction of the link rate KV transfers get: "
                              "0.92 x 125 MB/s = 115 MB/s")


class MeasuredThroughput(Section):
    from_group: str = Field(description="the path's prefill group",
                            json_schema_extra={"accepts": "a prefill group of `workers`"})
    to_group: str = Field(description="the path's decode group",
                          json_schema_extra={"accepts": "a decode group of `workers`"})
    bytes_per_second: Throughput = Field(description="the throughput measured on that path (e.g. by the probe)")


class SizingParameters(Section):
    vllm_base_memory: Bytes = Field(units.parse_memory("3584Mi"), description="host RSS of a vLLM worker without "
                                    "a KV mirror")
    host_headroom_percent: float = Field(10, ge=0, le=100, description="headroom over the KV mirror for copy "
                                         "temporaries and NIXL/UCX")
    gpu_overhead_per_worker: Bytes = Field(units.parse_memory("1536Mi"), description="ESTIMATE: CUDA context, "
                                           "activations, runtime buffers per worker")
    # Same-node transfer throughput. None: SAME_NODE_BYTES_PER_SECOND for the stack's NIXL op (READ
    # or WRITE, from kvTransfer.connector); a value here overrides both.
    same_node_bytes_per_second: Optional[Throughput] = Field(
        None, description="same-node KV transfer throughput (NIXL over host TCP); unset, a development machine's "
        "measurement (an ESTIMATE for the lab; [measurements.md](measurements.md)) until "
        "`sizing.measured` holds the lab's own", json_schema_extra={
            "default_text": f"unset: `{units.quantity(SAME_NODE_BYTES_PER_SECOND['READ'])}`, the block READ "
                            "NixlConnector makes"})
    link: Link = Field(Link(), description="the cross-node link")
    measured: list[MeasuredThroughput] = Field([], description="a measured throughput replaces the default for "
                                               "that path", json_schema_extra={
                                                   "accepts": "`[{fromGroup, toGroup, bytesPerSecond}]`; one entry "
                                                              "per path"})
