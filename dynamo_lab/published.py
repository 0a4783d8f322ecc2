"""The lab's published figures, from its write-up "Re-measuring Separate Serving in a Small Cluster"
(docs/lab.md): the one copy the report, the predictor and the tests compare against.

Same-server (2 prefill + 2 decode on the 24GB GPU) against the KV-routing baseline (6 aggregated
workers), 2,371-token requests (2,000 shared-prefix + 371 unique tokens), medians of 3 runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Cell:
    ttft_p50_ms: float
    ttft_p99_ms: Optional[float]
    requests_per_s: Optional[float]


_TABLE = {
    #          KV routing: p50, p99, req/s       same-server: p50, p99, req/s
    (2, 4): ((34, 73, 10.9), (286, 592, 6.5)),
    (7, 4): ((40, 129, 8.9), (375, 1007, 5.6)),
    (12, 4): ((43, 138, 8.7), (465, 887, 5.0)),
    (24, 4): ((64, 149, 8.1), (518, 958, 4.8)),
    (2, 8): ((49, 145, 14.7), (462, 981, 9.0)),
    (7, 8): ((60, 163, 12.2), (650, 1477, 7.2)),
    (12, 8): ((69, 172, 12.1), (794, 1744, 6.4)),
    (24, 8): ((106, 184, 11.5), (896, 1776, 6.0)),
}

TABLE: dict[str, dict[tuple[int, int], Cell]] = {
    "kv-routing": {k: Cell(*kv) for k, (kv, _) in _TABLE.items()},
    "same-server": {k: Cell(*same) for k, (_, same) in _TABLE.items()},
    # Cross-server at prefix types 2, concurrency 4: the two requests that finished before the
    # prefill worker was OOMKilled 9 s in (CROSS_SERVER_CONCURRENCY_4_MS); no p99 or throughput
    # was published.
    "cross-server": {(2, 4): Cell(2040, None, None)},
}

# Cross-server at concurrency 4 (2 requests before the OOM): their TTFTs, ms.
CROSS_SERVER_CONCURRENCY_4_MS = (2039, 2040)

# Cross-server at concurrency 1 (4 requests before the OOM): median and max TTFT, ms.
CROSS_SERVER_CONCURRENCY_1_MS = {"median": 1637, "max": 2653}

# Prefill-side cache token ratio (share of prompt tokens served from a prefix cache), as a
# (low, high) range over the runs, by (stack, prefix types). Same-server at 2 types was published
# for concurrency 4 only; "about 0.20" at 24 types is kept as 0.20.
CACHE_TOKEN_RATIO = {
    ("same-server", 2): (0.857, 0.857),
    ("same-server", 12): (0.40, 0.42),
    ("same-server", 24): (0.20, 0.20),
    ("kv-routing", 12): (0.57, 0.66),
    ("kv-routing", 24): (0.36, 0.43),
}


def cell(stack: str, prefix_types: int, concurrency: int) -> Optional[Cell]:
    return TABLE.get(stack, {}).get((prefix_types, concurrency))
