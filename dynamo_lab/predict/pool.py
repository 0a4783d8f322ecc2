"""Cells simulated on every core the process may use.

A cell's simulation is deterministic (each simulated graph draws from its own numbered random
stream, cells.STREAM), so simulating cells in other processes changes no figure, only the wall
time: advise predicts hundreds of cells, one core at a time in pure Python.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from dynamo_lab.predict import cells
from dynamo_lab.predict.cells import Row, Usage
from dynamo_lab.predict.objectives import Objective
from dynamo_lab.predict.params import LabParams
from infra.config.schema import StackConfig
from infra.sizing import StackSizing

# Below this many cells a pool's start (a process per core) costs more than it saves.
MIN_CELLS = 4


@dataclass(frozen=True)
class Job:
    """One cells.simulate call."""

    config: StackConfig
    sizing: StackSizing
    prefix_types: int
    concurrency: int
    lab: LabParams
    graphs: int
    runs: int
    rate: Optional[float] = None
    pool_scale: float = 1.0  # cells.topology's: --validate and --calibrate scale pools to the lab's
    objectives: tuple[Objective, ...] = ()  # advise's: the rows' goodput under them


def _run(job: Job) -> tuple[Row, Usage]:
    return cells.simulate(job.config, job.sizing, job.prefix_types, job.concurrency, job.lab, job.pool_scale,
                          graphs=job.graphs, runs=job.runs, rate=job.rate, objectives=job.objectives)


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _quiet() -> None:
    """A pool process leaves Ctrl-C to the command: it is stopped by the executor's shutdown."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _key(job: Job) -> bytes:
    return cells.cell_key(job.config, job.sizing, job.prefix_types, job.concurrency, job.lab, job.pool_scale,
                          job.graphs, job.runs, job.rate, job.objectives)


def simulate(jobs: list[Job], workers: Optional[int] = None,
             done: Callable[[int], None] = lambda n: None) -> list[tuple[Row, Usage]]:
    """Every job's (Row, Usage), in the jobs' order; `workers` processes (None: every core), one for
    a handful of jobs. A job this process has simulated before, here or in a pool (advise screens
    the heaviest point, then every point, the heaviest again), is recalled, not simulated again.
    `done` is told how many have finished as they finish, each count from 1 to len(jobs) once (advise
    reports a candidate at each multiple of its points), recalled jobs first."""
    workers = cores() if workers is None else workers
    if workers <= 1 or len(jobs) < MIN_CELLS:
        out = []
        for job in jobs:
            out.append(_run(job))  # cells.simulate recalls and remembers in this process itself
            done(len(out))
        return out
    keys = [_key(job) for job in jobs]
    found: dict[int, tuple[Row, Usage]] = {}
    for k, key in enumerate(keys):
        cell = cells.recall(key)
        if cell is not None:
            found[k] = cell
            done(len(found))  # each count, as one process tells them: a caller may report every Nth
    # The largest jobs first (the most requests a run simulates): a pool handed a large job last
    # leaves its other cores idle while it runs; handed out largest first, the last jobs are small
    # and the cores finish together. Each job's figures are its own (cells.STREAM), whatever the order.
    order = sorted((k for k in range(len(jobs)) if k not in found),
                   key=lambda k: -cells.run_requests(jobs[k].config, jobs[k].concurrency, jobs[k].rate))
    if order:
        # fork where the platform has it (the jobs' modules are imported already); spawn elsewhere.
        context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        with ProcessPoolExecutor(max_workers=min(workers, len(order)), mp_context=context, initializer=_quiet) as ex:
            results: Iterator = ex.map(_run, [jobs[k] for k in order])
            try:
                for k, result in zip(order, results, strict=True):
                    cells.remember(keys[k], result)
                    found[k] = result
                    done(len(found))
            except BaseException:
                ex.shutdown(wait=True, cancel_futures=True)
                raise
    return [found[k] for k in range(len(jobs))]
