"""Service-level objectives on a request's latencies, and goodput under them.

An objective bounds one percentile of one latency over a point's requests (docs/predictor.md,
"Decode figures", says how each is measured):
- TTFT: sent to first token, one value a request;
- ITL: every gap between two consecutive tokens of a request, all requests' gaps together (vLLM's
  benchmark_serving ITL; AIPerf's inter_chunk_latency when each chunk holds one token);
- TPOT: a request's mean time per output token after its first, (last - first token) / (tokens - 1)
  (vLLM's TPOT; AIPerf calls this inter_token_latency; AIConfigurator's TPOT objective is it).
A layout meets an objective at a point when that percentile of the point's figures (cells.Row) is
within the bound.

Goodput follows DistServe (Zhong et al., "DistServe: Disaggregating Prefill and Decoding for
Goodput-optimized Large Language Model Serving", OSDI 2024): the rate of completed requests that
meet every objective. A request meets the TTFT and TPOT objectives by its own value; the ITL
objective by its own gaps: at least the objective's percentile of them within the bound (p99 with
fewer than 100 gaps: every one). A request of one output token has no gap and no TPOT: an ITL or
TPOT objective bounds nothing of it, and a point where every request has one token has no ITL or
TPOT figure (None), which meets such an objective. So goodput is never above the requests/s completed, and the share
of requests meeting a p99 objective is what a p99 within its bound promises. DistServe ranks by
the highest rate at which such a share holds; `advise` ranks the layouts meeting every objective
by their goodput at the traffic asked for, and per GPU as AIConfigurator ranks (output tokens/s).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

METRICS = {"ttft": "TTFT", "itl": "ITL", "tpot": "TPOT"}
PERCENTILES = (50, 99)


@dataclass(frozen=True)
class Objective:
    metric: str  # a key of METRICS
    percentile: int  # one of PERCENTILES
    bound_ms: float

    def __post_init__(self) -> None:
        if self.metric not in METRICS or self.percentile not in PERCENTILES or not self.bound_ms > 0:
            raise ValueError(f"no objective {self.metric} p{self.percentile} <= {self.bound_ms} ms: the metric is one "
                             f"of {', '.join(METRICS)}, the percentile {' or '.join(map(str, PERCENTILES))}, the "
                             "bound above 0")

    @property
    def field(self) -> str:
        """The cells.Row figure it bounds."""
        return f"{self.metric}_p{self.percentile}_ms"

    @property
    def label(self) -> str:
        return f"{METRICS[self.metric]} p{self.percentile}"

    @property
    def flag(self) -> str:
        """The advise option that sets it."""
        return f"--{self.metric}-p{self.percentile}-max"

    def describe(self) -> str:
        return f"{self.label} <= {self.bound_ms:,g} ms"

    def value(self, row) -> Optional[float]:
        """The row's figure; None where it has none (ITL and TPOT with one output token a request)."""
        return getattr(row, self.field)

    def met_by(self, row) -> bool:
        value = self.value(row)
        return value is None or value <= self.bound_ms  # no gap between tokens: nothing to bound

    def request_meets(self, ttft_ms: float, tpot_ms: Optional[float], gaps_ms: Sequence[float]) -> bool:
        """Whether one request meets it (this module's docstring); `tpot_ms` None: one output token."""
        if self.metric == "ttft":
            return ttft_ms <= self.bound_ms
        if self.metric == "tpot":
            return tpot_ms is None or tpot_ms <= self.bound_ms
        if not gaps_ms:
            return True  # one output token: no gap to bound
        within = sum(g <= self.bound_ms for g in gaps_ms)
        return within >= self.percentile / 100 * len(gaps_ms)


# The objectives advise holds unless a flag bounds their metric (docs/advise.md, "Objectives and
# goodput"): an interactive chat's, chosen here, not a standard: the first token within 2 s for 99
# requests in 100, and 99 gaps in 100 between tokens within 200 ms (5 tokens/s, about the pace one
# reads at).
DEFAULT_OBJECTIVES = (Objective("ttft", 99, 2000.0), Objective("itl", 99, 200.0))


def meets_all(objectives: Sequence[Objective], ttft_ms: float, tpot_ms: Optional[float],
              gaps_ms: Sequence[float]) -> bool:
    return all(o.request_meets(ttft_ms, tpot_ms, gaps_ms) for o in objectives)
