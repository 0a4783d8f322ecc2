"""How far the predictor's figures are from the lab's: what `predict --validate` measures, per metric.

The constants were fitted to the write-up's concurrency-4 cells and the concurrency-8 cells were
held out (docs/predictor.md), so each metric has two sets of errors: the fitted cells' and the
held-out cells'. `advise` shows both, and calls two layouts tied when their goodput differs by less
than the held-out cells' median error of requests/s (verdict.py).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Callable

from dynamo_lab.predict import cells
from dynamo_lab.predict.calibrate import CALIBRATION_CONCURRENCY
from dynamo_lab.predict.params import LAB, LabParams
from dynamo_lab.predict.validate import TABLE_STACKS
from infra.errors import UserError

METRICS = ("ttft_p50_ms", "ttft_p99_ms", "requests_per_s")


@dataclass(frozen=True)
class MetricError:
    fit_median: float  # |predicted - published| / published, over the fitted cells
    fit_worst: float
    holdout_median: float  # the same over the held-out cells
    holdout_worst: float
    cells: int  # published cells of this metric, fitted and held out


@dataclass(frozen=True)
class Uncertainty:
    metrics: dict[str, MetricError]

    def as_dict(self) -> dict:
        return {k: asdict(v) for k, v in self.metrics.items()}

    @property
    def errors(self) -> dict[str, float]:
        """Each measured figure's held-out median error, by its name (a cells.Row field): what an
        objective on it must be met or broken by to be a clear call (verdict.near_bounds)."""
        return {k: v.holdout_median for k, v in self.metrics.items()}


def from_errors(errors: list[cells.Error]) -> Uncertainty:
    out = {}
    for metric in METRICS:
        fit = [abs(e.relative) for e in errors if e.metric == metric and e.concurrency == CALIBRATION_CONCURRENCY]
        held = [abs(e.relative) for e in errors if e.metric == metric and e.concurrency != CALIBRATION_CONCURRENCY]
        if fit and held:
            out[metric] = MetricError(statistics.median(fit), max(fit), statistics.median(held), max(held),
                                      len(fit) + len(held))
    return Uncertainty(out)


def measured(load: Callable[[str], tuple], lab: LabParams = LAB) -> Uncertainty:
    """The validation's errors, recomputed: `load(stack)` gives (config, sizing) of the stacks the
    write-up published (the lab's own, as shipped). About 4 s: every published cell is predicted."""
    errors = [e for name in TABLE_STACKS
              for e in cells.errors(name, cells.predict(*load(name), lab, lab.pool_scale.get(name, 1.0)))]
    return complete(from_errors(errors))


def complete(found: Uncertainty) -> Uncertainty:
    """`found`, if it has every metric's fitted and held-out errors; else a UserError that says why."""
    missing = [m for m in METRICS if m not in found.metrics]
    if missing:
        raise UserError(f"the predictor's error could not be measured for {', '.join(missing)}: the benchmark matrix "
                        f"of {' and '.join(TABLE_STACKS)} must hold published cells at concurrency "
                        f"{CALIBRATION_CONCURRENCY} (fitted) and another (held out); restore their `benchmark` "
                        "section as shipped (prefix types 2, 7, 12, 24 x concurrency 4, 8)")
    return found
