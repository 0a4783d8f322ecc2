"""Fit the lab's constants (params.py) to the write-up's concurrency-4 cells only.

`dynamo-lab predict --calibrate` runs this: a pattern search over the logarithms of the fitted
constants, minimising the squared log error of TTFT p50 and requests/s (and, at half weight, TTFT
p99) over every published concurrency-4 cell of same-server and KV routing. The concurrency-8
cells are never looked at here: they are the hold-out docs/predictor.md's error table reports.

`dynamo-lab predict --cross-validate` judges a model on the concurrency-4 cells alone, so a change
can be chosen without the hold-out: each prefix type in turn is left out, the constants are
refitted to the other prefix types' cells, and the left-out cells are predicted with that fit.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Collection, Optional

from dynamo_lab import published
from dynamo_lab.predict import cells, pool, validate
from dynamo_lab.predict.cells import Error, Row
from dynamo_lab.predict.params import BOUNDS, LabParams
from infra import prefix_cache
from infra.config.schema import StackConfig
from infra.sizing import StackSizing

FITTED = tuple(BOUNDS)
WEIGHTS = {"ttft_p50_ms": 1.0, "requests_per_s": 1.0, "ttft_p99_ms": 0.5}
CALIBRATION_CONCURRENCY = 4


def fitted_cells(stacks: dict[str, tuple[StackConfig, StackSizing]],
                 prefix_types: Optional[Collection[int]] = None) -> list[tuple[str, int]]:
    """The published concurrency-4 cells a fit reads, as (stack, prefix types): every one, or only
    those of `prefix_types`."""
    return [(name, p) for name in stacks for (p, c) in published.TABLE[name]
            if c == CALIBRATION_CONCURRENCY and (prefix_types is None or p in prefix_types)]


def predicted(stacks: dict[str, tuple[StackConfig, StackSizing]], lab: LabParams,
              which: list[tuple[str, int]]) -> list[Row]:
    """Each cell's Row with `lab` (its stack's pools scaled as fitted), simulated on every core."""
    cards = {name: validate.lab_cards(cfg, lab.prefill_efficiency) for name, (cfg, _) in stacks.items()}
    jobs = [pool.Job(cards[name], stacks[name][1], p, CALIBRATION_CONCURRENCY, lab, cells.SIMULATED_GRAPHS,
                     cells.RUNS_PER_GRAPH, pool_scale=lab.pool_scale.get(name, 1.0)) for name, p in which]
    return [row for row, _ in pool.simulate(jobs)]


def loss(stacks: dict[str, tuple[StackConfig, StackSizing]], lab: LabParams,
         prefix_types: Optional[Collection[int]] = None) -> float:
    """The fit's loss over the concurrency-4 cells (of `prefix_types` only, where given)."""
    which = fitted_cells(stacks, prefix_types)
    total, n = 0.0, 0
    for (name, p), row in zip(which, predicted(stacks, lab, which), strict=True):
        cell = published.TABLE[name][(p, CALIBRATION_CONCURRENCY)]
        cfg = stacks[name][0]
        for metric, weight in WEIGHTS.items():
            value = getattr(cell, metric)
            if value is not None:
                total += weight * math.log(getattr(row, metric) / value) ** 2
                n += 1
        target = cache_hit_target(name, p)
        if target is not None:
            total += (row.prefill_cache_ratio / max_cache_ratio(cfg) - target) ** 2 / 0.1 ** 2 * 0.05
            n += 1
    return total / n


def max_cache_ratio(cfg: StackConfig) -> float:
    """The share of a prompt a prefix-cache hit can cover: the prefix's whole blocks."""
    b = cfg.benchmark
    return prefix_cache.reusable_prefix_tokens(b.prefix_tokens) / (b.prefix_tokens + b.unique_tokens)


def cache_hit_target(stack: str, prefix_types: int) -> Optional[float]:
    """The write-up's prefill-side cache token ratio as a share of its best case (the 2-prefix
    figure, where every prompt found its prefix), or None where none was published."""
    ratio = published.CACHE_TOKEN_RATIO.get((stack, prefix_types))
    best = published.CACHE_TOKEN_RATIO.get(("same-server", 2))
    if ratio is None or best is None:
        return None
    return (sum(ratio) / 2) / best[0]


def pattern_search(f: Callable[[list[float]], float], x0: list[float], step: float = 0.4, smallest: float = 0.02,
                   log: Callable[[str], None] = lambda m: None) -> tuple[list[float], float]:
    """Coordinate pattern search: try each coordinate up and down by `step`, keep what lowers f,
    halve the step when nothing does; returns the best x and f there. Slower than gradient methods
    but steady on a simulated (piecewise, slightly noisy) loss, and needs no SciPy in the lock."""
    x, fx = list(x0), f(x0)
    while step >= smallest:
        improved = False
        for i in range(len(x)):
            for direction in (1, -1):
                trial = list(x)
                trial[i] += direction * step
                ft = f(trial)
                if ft < fx:
                    x, fx, improved = trial, ft, True
                    break
        log(f"step {step:.3f}: loss {fx:.4f}")
        if not improved:
            step /= 2
    return x, fx


def calibrate(stacks: dict[str, tuple[StackConfig, StackSizing]], start: LabParams,
              log: Callable[[str], None] = lambda m: None,
              prefix_types: Optional[Collection[int]] = None) -> tuple[LabParams, float]:
    """The constants that fit the concurrency-4 cells (of `prefix_types` only, where given) best,
    starting from `start`, and the loss there."""
    scaled = sorted(stacks)

    def params(x: list[float]) -> LabParams:
        # Each constant stays inside what the hardware allows (params.BOUNDS), whatever the search tries.
        fitted = {k: min(max(math.exp(v), BOUNDS[k][0]), BOUNDS[k][1]) for k, v in zip(FITTED, x[:len(FITTED)],
                                                                                        strict=True)}
        scales = {name: math.exp(v) for name, v in zip(scaled, x[len(FITTED):], strict=True)}
        return dataclasses.replace(start, **fitted, pool_scale=scales)

    x0 = [math.log(getattr(start, k)) for k in FITTED] + [math.log(start.pool_scale.get(n, 1.0)) for n in scaled]
    best, best_loss = pattern_search(lambda x: loss(stacks, params(x), prefix_types), x0, log=log)
    return params(best), best_loss


@dataclass(frozen=True)
class Fold:
    """One fold of the cross-validation: `left_out`'s concurrency-4 cells predicted with constants
    fitted to the other prefix types' only."""

    left_out: int
    fit: LabParams
    loss: float  # the fit's, over the cells it read
    errors: list[Error]  # the left-out cells'


def cross_validate(stacks: dict[str, tuple[StackConfig, StackSizing]], start: LabParams,
                   log: Callable[[str], None] = lambda m: None) -> list[Fold]:
    """Leave one prefix type out: a fold per prefix type of the concurrency-4 cells. The
    concurrency-8 hold-out is not read."""
    every = sorted({p for _, p in fitted_cells(stacks)})
    folds = []
    for p in every:
        log(f"cross-validation: prefix types {p} left out, fitted to {', '.join(map(str, every))} but {p}")
        fit, fit_loss = calibrate(stacks, start, log=log, prefix_types=[q for q in every if q != p])
        which = fitted_cells(stacks, [p])
        rows = predicted(stacks, fit, which)
        folds.append(Fold(p, fit, fit_loss, [e for (name, _), row in zip(which, rows, strict=True)
                                             for e in cells.errors(name, [row])]))
    return folds
