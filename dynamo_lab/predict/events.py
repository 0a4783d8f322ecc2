"""The discrete-event clock and the processor-sharing server the serving model (sim.py) is built
of: they know time and shared capacity, nothing of serving."""

from __future__ import annotations

import heapq
import itertools
from typing import Callable, Optional

EPS = 1e-12


class Sim:
    def __init__(self) -> None:
        self.now = 0.0
        self._events: list = []
        self._seq = itertools.count()
        self._stopped = False

    def at(self, time: float, fn: Callable, *args) -> None:
        heapq.heappush(self._events, (time, next(self._seq), fn, args))

    def run(self, until: Optional[Callable[[], bool]] = None) -> None:
        """Events in time order until none are left, an event calls stop(), or `until()` holds (asked
        before each event)."""
        events, pop = self._events, heapq.heappop  # read once: this loop runs once per event
        self._stopped = False
        while events and not self._stopped:
            if until is not None and until():
                break
            self.now, _, fn, args = pop(events)
            fn(*args)

    def stop(self) -> None:
        """End run() once the event in progress is done: for a model that knows where its run ends,
        which is cheaper than an `until` asked before every event."""
        self._stopped = True


class Sharing:
    """A server of `capacity` units of work per second, no flow faster than `per_job` (a flow's own
    limit, e.g. one TCP stream's software path). A job is one flow, or several moving side by side
    (`submit`'s `flows`: a transfer's rank-to-rank reads), which take a share each. Processor
    sharing: the capacity split evenly among the flows in progress. `in_order`: the jobs served in
    the order they came, each at its flows' `per_job` while capacity is left, the rest waiting
    (several NIXL flows through one host finish in the order they were posted:
    docs/measurements.md, "Several flows at once")."""

    def __init__(self, sim: Sim, capacity: float, per_job: float = float("inf"), in_order: bool = False) -> None:
        self.sim, self.capacity, self.per_job, self.in_order = sim, capacity, per_job, in_order
        self.jobs: dict[int, list] = {}  # id -> [work left, callback, flows]
        self.flows = 0  # of every job in progress
        self.last = 0.0
        self.version = 0
        self.busy_s = 0.0  # time with at least one job, up to `last` (what binds a layout: advise)
        # Work per second one flow gets now, shared evenly: a share of the capacity per flow, at most
        # `per_job` (a job of several flows gets that times its flows); worked out when the flows
        # change (_share), read on every event.
        self.unit = 0.0
        self._ids = itertools.count()

    def busy_until_now(self) -> float:
        """Seconds this server has had work, up to now."""
        return self.busy_s + (self.sim.now - self.last if self.jobs else 0.0)

    def _advance(self) -> None:
        now = self.sim.now
        if self.jobs:
            elapsed = now - self.last
            self.busy_s += elapsed
            if self.in_order:
                for job, rate in zip(self.jobs.values(), self.rates(), strict=True):
                    job[0] -= elapsed * rate
            else:
                unit = self.unit  # rates()'s products, without the list: this runs on every event
                for job in self.jobs.values():
                    job[0] -= elapsed * (job[2] * unit)
        self.last = now

    def _share(self) -> None:
        """Work out `unit` anew: the jobs in progress changed (a job submitted or completed)."""
        self.unit = min(self.capacity / self.flows, self.per_job) if self.jobs else 0.0

    def rates(self) -> list[float]:
        """Work per second each job gets now, in the order they came."""
        if not self.in_order:
            # One flow's rate, worked out once each time the flows change; flows x min(share, cap)
            # is the min of the products exactly (a positive factor keeps the order of rounded products).
            unit = self.unit
            return [job[2] * unit for job in self.jobs.values()]
        out, left = [], self.capacity
        for job in self.jobs.values():
            out.append(min(job[2] * self.per_job, left))
            left -= out[-1]
        return out

    def _reschedule(self) -> None:
        self.version += 1
        if not self.jobs:
            return
        jobs = self.jobs.values()
        if not self.in_order and self.flows == len(self.jobs):  # one flow each, shared: one rate for all
            left = min(job[0] for job in jobs) if len(jobs) > 1 else next(iter(jobs))[0]
            self.sim.at(self.sim.now + max(left, 0.0) / self.unit, self._complete, self.version)
        else:
            left = min(job[0] / rate for job, rate in zip(jobs, self.rates(), strict=True) if rate > 0)
            self.sim.at(self.sim.now + max(left, 0.0), self._complete, self.version)

    def submit(self, work: float, callback: Callable[[], None], flows: int = 1) -> None:
        self._advance()
        self.jobs[next(self._ids)] = [work, callback, flows]
        self.flows += flows
        self._share()
        self._reschedule()

    def _complete(self, version: int) -> None:
        if version != self.version:
            return
        self._advance()
        now = self.sim.now
        # Done: its work is spent, or what is left would not move the clock (far into a long run, a
        # clock of about 16,000 s cannot add 1e-12 s: rescheduling it would repeat this forever).
        spent = EPS * max(1.0, self.capacity)
        if self.in_order:
            rated = zip(self.jobs.items(), self.rates(), strict=True)
        else:  # rates()'s products, without its list: this runs once per simulated step
            unit = self.unit
            rated = ((item, item[1][2] * unit) for item in self.jobs.items())
        done = [k for (k, job), rate in rated if job[0] <= spent or (rate > 0 and now + job[0] / rate == now)]
        callbacks = []
        for k in done:
            _, callback, flows = self.jobs.pop(k)
            self.flows -= flows
            callbacks.append(callback)
        self._share()
        self._reschedule()
        for cb in callbacks:
            cb()
