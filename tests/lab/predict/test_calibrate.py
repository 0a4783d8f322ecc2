"""The fit reads only the concurrency-4 cells, and cross-validation keeps each fold's cells out of its fit."""

from __future__ import annotations

import pytest

from dynamo_lab import published
from dynamo_lab.predict import calibrate, cells, pool, text
from dynamo_lab.predict.params import LAB
from tests.helpers import run_cli, sized

STACKS = {name: sized(name) for name in ("kv-routing", "same-server")}


@pytest.fixture
def simulated(monkeypatch):
    """Every cell the fit and the scoring ask for, in order, answered with the published figures
    times 1.1 (no simulation): the test is of what is read, not of the model."""
    asked: list[list[tuple[str, int, int, float]]] = []
    # A stack by its worker groups: the fit hands the lab's stacks on with their classes at the
    # prefill efficiency it tries (validate.lab_cards), a config of their own.
    names = {tuple(g.name for g in cfg.workers): name for name, (cfg, _) in STACKS.items()}
    name = lambda j: names[tuple(g.name for g in j.config.workers)]  # noqa: E731

    def fake(jobs, workers=None, done=lambda n: None):
        asked.append([(name(j), j.prefix_types, j.concurrency, j.pool_scale) for j in jobs])
        out = []
        for j in jobs:
            cell = published.TABLE[name(j)][(j.prefix_types, j.concurrency)]
            out.append((cells.Row(j.prefix_types, j.concurrency, cell.ttft_p50_ms * 1.1, cell.ttft_p99_ms * 1.1,
                                  cell.requests_per_s * 1.1, 0.5, None), None))
        return out
    monkeypatch.setattr(pool, "simulate", fake)
    return asked


def test_the_fit_reads_every_concurrency_4_cell_and_no_other(simulated):
    calibrate.loss(STACKS, LAB)
    (cells_read,) = simulated
    assert sorted(c[:3] for c in cells_read) == sorted(
        (name, p, 4) for name in STACKS for (p, c) in published.TABLE[name] if c == 4)
    # Each stack's pools scaled as fitted (the lab did not pin them).
    assert all(scale == LAB.pool_scale[name] for name, _, _, scale in cells_read)


def test_each_fold_is_fitted_without_its_prefix_type_and_scored_on_it_alone(simulated, monkeypatch):
    fits: list[list[float]] = []

    def search(f, x0, log=lambda m: None, **kwargs):
        before = len(simulated)
        value = f([v + 0.1 * len(fits) for v in x0])  # each fold lands somewhere of its own
        assert len(simulated) == before + 1
        fits.append(x0)
        return [v + 0.1 * (len(fits) - 1) for v in x0], value
    monkeypatch.setattr(calibrate, "pattern_search", search)
    folds = calibrate.cross_validate(STACKS, LAB)
    every = sorted({p for (p, c) in published.TABLE["kv-routing"] if c == 4})
    assert [f.left_out for f in folds] == every
    assert len({repr(f.fit) for f in folds}) == len(folds) and all(f.fit != LAB for f in folds[1:])
    # simulated: fold 1's fit, its scoring, fold 2's fit, ...
    for k, fold in enumerate(folds):
        fit_read, scored = simulated[2 * k], simulated[2 * k + 1]
        assert {p for _, p, _, _ in fit_read} == set(every) - {fold.left_out}
        assert {(name, p) for name, p, _, _ in scored} == {(name, fold.left_out) for name in STACKS}
        assert all(c == 4 for _, _, c, _ in fit_read + scored)  # the concurrency-8 hold-out is never read
        # The left-out cells are predicted with the fold's own fit (its pool scales), not the start's.
        assert all(scale == fold.fit.pool_scale[name] for name, _, _, scale in scored)
        assert {(e.stack, e.prefix_types, e.concurrency) for e in fold.errors} == {
            (name, fold.left_out, 4) for name in STACKS}
    said = text.cross_validation(folds, LAB)
    # Every published figure is 1.1x: +10%, within every goal.
    assert said.splitlines()[-1].startswith(f"left-out cells: {sum(len(f.errors) for f in folds)}/"
                                            f"{sum(len(f.errors) for f in folds)} within goal")
    assert "+10%" in said and "NO" not in said.split()
    # Fold 0 kept the start; each later fold's logarithms moved by 0.1 per fold: over 5%, so named.
    assert "  2 left out: none by more than 5%" in said
    assert f"  {folds[1].left_out} left out: frontend_s {LAB.frontend_s:.3g} -> " in said


@pytest.mark.parametrize(("args", "says"), [
    (["--cross-validate", "--json"], "--cross-validate has no --json"),
    (["--calibrate", "--json"], "--calibrate has no --json"),
    (["--cross-validate", "kv-routing"], "--cross-validate and the stack kv-routing cannot go together"),
    (["--validate", "--calibrate"], "--validate and --calibrate cannot go together"),
    (["--validate", "--rate", "2"], "--validate and --rate cannot go together"),
])
def test_a_mode_with_what_it_ignores_is_refused_before_anything_runs(args, says, monkeypatch):
    def never(*a, **k):
        raise AssertionError("simulated before the arguments were checked")
    monkeypatch.setattr(pool, "simulate", never)
    monkeypatch.setattr(cells, "simulate", never)
    result = run_cli("predict", *args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"error: dynamo-lab predict: {says}") and result.stderr.count("\n") == 1
