"""The discrete-event clock and the processor-sharing server the serving model (sim.py) is built
of: they know time and shared capacity, nothing of serving."""

from __future__ import annotations

import heapq
import itertools
from typing import Callable

EPS = 1e-12


class Sim:
    def __init__(self) -> None:
        self.now = 0.0
        self._events: list = []
        self._seq = itertools.count()

    def at(self, time: float, fn: Callable, *args) -> None:
        heapq.heappush(self._events, (time, next(self._seq), fn, args))

    def run(self, until: Callable[[], bool]) -> None:
        while self._events and not until():
            self.now, _, fn, args = heapq.heappop(self._events)
            fn(*args)


class Sharing:
    """A processor-sharing server: `capacity` units of work per second split evenly among its jobs,
    none faster than `per_job` (a flow's own limit, e.g. one TCP stream's software path)."""

    def __init__(self, sim: Sim, capacity: float, per_job: float = float("inf")) -> None:
        self.sim, self.capacity, self.per_job = sim, capacity, per_job
        self.jobs: dict[int, list] = {}
        self.last = 0.0
        self.version = 0
        self.busy_s = 0.0  # time with at least one job, up to `last` (what binds a layout: advise)
        self._ids = itertools.count()

    def busy_until_now(self) -> float:
        """Seconds this server has had work, up to now."""
        return self.busy_s + (self.sim.now - self.last if self.jobs else 0.0)

    def _advance(self) -> None:
        now = self.sim.now
        if self.jobs:
            self.busy_s += now - self.last
            done = (now - self.last) * self.rate()
            for job in self.jobs.values():
                job[0] -= done
        self.last = now

    def rate(self) -> float:
        """Work per second each job gets now."""
        jobs = len(self.jobs)
        return min(self.capacity / jobs, self.per_job) if jobs else 0.0

    def _reschedule(self) -> None:
        self.version += 1
        if self.jobs:
            jobs = self.jobs.values()
            left = min(job[0] for job in jobs) if len(jobs) > 1 else next(iter(jobs))[0]
            self.sim.at(self.sim.now + max(left, 0.0) / self.rate(), self._complete, self.version)

    def submit(self, work: float, callback: Callable[[], None]) -> None:
        self._advance()
        self.jobs[next(self._ids)] = [work, callback]
        self._reschedule()

    def _complete(self, version: int) -> None:
        if version != self.version:
            return
        self._advance()
        now, rate = self.sim.now, self.rate()
        # Done: its work is spent, or what is left would not move the clock (far into a long run, a
        # clock of about 16,000 s cannot add 1e-12 s: rescheduling it would repeat this forever).
        done = [k for k, job in self.jobs.items()
                if job[0] <= EPS * max(1.0, self.capacity) or now + job[0] / rate == now]
        callbacks = [self.jobs.pop(k)[1] for k in done]
        self._reschedule()
        for cb in callbacks:
            cb()
