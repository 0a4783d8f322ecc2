"""Cells simulated in other processes give the figures one process gives (pool.py)."""

from __future__ import annotations

import pytest

from dynamo_lab.predict import cells, pool
from dynamo_lab.predict.params import LAB
from tests.helpers import sized


def _jobs() -> list[pool.Job]:
    cfg, sizing = sized("same-server")
    # One simulated run per cell keeps this quick; five cells, so a pool is used (pool.MIN_CELLS).
    return [pool.Job(cfg, sizing, prefix_types, concurrency, LAB, graphs=1, runs=1)
            for prefix_types, concurrency in ((1, 1), (2, 2), (3, 4), (2, 1), (1, 2))]


@pytest.mark.process
def test_two_processes_give_each_cell_the_figures_one_gives_in_the_jobs_order():
    jobs = _jobs()
    assert len(jobs) >= pool.MIN_CELLS
    told: list[int] = []
    # Each way simulates every cell itself: none is handed the figures the other made (cells.forget).
    cells.forget()
    alone = pool.simulate(jobs, workers=1)
    cells.forget()
    shared = pool.simulate(jobs, workers=2, done=told.append)
    assert shared == alone
    # Rows are told apart by their cell, so a result out of order would not compare equal above
    # only by luck: each row names the cell it is.
    assert [(row.prefix_types, row.concurrency) for row, _ in shared] == [(j.prefix_types, j.concurrency) for j in jobs]
    assert told == list(range(1, len(jobs) + 1))


def test_a_handful_of_cells_is_simulated_in_this_process(monkeypatch):
    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was started for fewer than MIN_CELLS cells")
    monkeypatch.setattr(pool, "ProcessPoolExecutor", no_pool)
    told: list[int] = []
    out = pool.simulate(_jobs()[:pool.MIN_CELLS - 1], workers=8, done=told.append)
    assert len(out) == pool.MIN_CELLS - 1 and told == list(range(1, pool.MIN_CELLS))


def test_a_cell_simulated_again_is_the_same_figures_and_not_shared_with_the_caller(monkeypatch):
    # The second simulation of a cell comes from what the first made: the same Row and Usage, no
    # graph built again, and the caller's copy is its own.
    (job,) = _jobs()[:1]
    cells.forget()
    first = pool.simulate([job], workers=1)
    monkeypatch.setattr(cells, "ServingGraph", lambda *a, **k: (_ for _ in ()).throw(AssertionError("simulated twice")))
    again = pool.simulate([job], workers=1)
    assert again == first
    again[0][1].gpu_busy.clear()
    assert pool.simulate([job], workers=1) == first


@pytest.mark.process
def test_cells_a_pool_simulated_are_recalled_without_simulating_them_again(monkeypatch):
    # advise screens its heaviest point, then every point: the heaviest is the same cell again, and
    # the pool's processes are gone by then, so the parent keeps what they made.
    jobs = _jobs()
    cells.forget()
    pool.simulate(jobs[:2], workers=1)  # two of them simulated here first: recalled below, the rest pooled
    told: list[int] = []
    first = pool.simulate(jobs, workers=2, done=told.append)
    assert told == list(range(1, len(jobs) + 1))  # every count, recalled or pooled, as one process tells them
    monkeypatch.setattr(pool, "ProcessPoolExecutor", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("a pool was started for cells already simulated")))
    monkeypatch.setattr(cells, "ServingGraph", lambda *a, **k: (_ for _ in ()).throw(AssertionError("simulated twice")))
    told.clear()
    again = pool.simulate(list(reversed(jobs)), workers=2, done=told.append)
    assert again == list(reversed(first))
    assert told == list(range(1, len(jobs) + 1))  # every count, as one process tells them
    again[0][1].gpu_busy.clear()  # the caller's copy is its own
    assert pool.simulate(jobs, workers=2) == first
