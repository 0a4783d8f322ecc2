"""The traffic advise ranks layouts for: a request shape over a matrix of points (prefix types x
concurrency, closed loop, or prefix types x rates, open loop). What a command gives and how it is
checked is inputs.py's; how a traffic is written into a candidate's stack file is stack_file.py's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional


class Point(NamedTuple):
    """One traffic point: prefix types and, closed loop, the requests in flight; open loop
    (`rate` requests/s arriving, Poisson), concurrency 0."""

    prefix_types: int
    concurrency: int
    rate: Optional[float] = None

    def label(self, prefix: bool) -> str:
        """As the tables head it: 24x8 (prefix types x concurrency), 24x1.5/s open loop; with no shared
        prefix the concurrency or rate alone."""
        load = f"{self.rate:g}/s" if self.rate is not None else str(self.concurrency)
        return f"{self.prefix_types}x{load}" if prefix else load

    def where(self, prefix: bool) -> str:
        """In words, for a sentence."""
        load = f"{self.rate:g} requests/s open loop" if self.rate is not None else f"concurrency {self.concurrency}"
        return f"prefix types {self.prefix_types}, {load}" if prefix else load


@dataclass(frozen=True)
class Traffic:
    """The requests advise ranks layouts for: one request shape, a matrix of points: prefix types x
    concurrency (closed loop, as the lab's benchmark ran), or prefix types x `rates` (open loop)."""

    input_tokens: int
    prefix_tokens: int
    output_tokens: int
    prefix_types: tuple[int, ...]
    concurrency: tuple[int, ...]
    given: bool  # False: the base stack's benchmark section
    # Open loop: requests/s arriving (Poisson) at each point instead of `concurrency` in flight;
    # `concurrency` is then only what the candidates are sized for (workload.concurrency).
    rates: tuple[float, ...] = ()

    @property
    def open_loop(self) -> bool:
        return bool(self.rates)

    @property
    def simulated_prefix_types(self) -> tuple[int, ...]:
        """The prefix types that are workloads of their own: with no shared prefix a request draws
        one of several empty prefixes, so every prefix type is the same workload, simulated once."""
        return self.prefix_types if self.prefix_tokens else (1,)

    @property
    def points(self) -> list[Point]:
        if self.rates:
            return [Point(p, 0, r) for r in self.rates for p in self.simulated_prefix_types]
        return [Point(p, c) for c in self.concurrency for p in self.simulated_prefix_types]
