"""One verdict between two layouts under objectives: what advise ranks by, what its "does separation
pay" line says and what the crossover's table says, from one comparison, so none contradicts another.

A layout's standing (docs/advise.md, "How it ranks"), in order:
1. whether it meets every objective at every point of the traffic;
2. whether it runs only by preempting: at some point vLLM preempted more than PREEMPTING of its
   requests (its KV does not fit the load; a preempted request is recomputed from its first token,
   so its figures rest on work thrown away, and a pool a little smaller than the model's makes
   them worse than predicted);
3. among those that break an objective, how far over its worst one (value / bound), least first;
4. its goal's figure (goodput, or goodput per GPU), highest first.
One layout is called better than another only where 1 or 2 differ, or their goodput differs by more
than the uncertainty (the predictor's held-out median error of requests/s: uncertainty.py); inside
it they tie, and the words say what measurement would separate them. Where 1 differs, it decides
only if the call is clear of the predictor's error on the figures that make it: the one meeting
every objective meets none by less than that figure's held-out median error (TTFT p50, TTFT p99),
and the other breaks one by more (near_bounds), or, breaking only within that error, could not
have the goodput of the first even meeting every objective (its requests/s, `ceiling`); else it
is too close to call. ITL and TPOT were never measured, so no error widens their bounds: a
measurement of them would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from dynamo_lab.predict.objectives import Objective

# More preemptions than this share of its measured requests at some point: the layout runs only by
# preempting (one in a hundred requests recomputed from its first token).
PREEMPTING = 0.01


@dataclass(frozen=True)
class Standing:
    label: str
    meets: bool  # every objective at every point
    preempting: bool
    over: float  # its worst objective's value over its bound (at most 1 when it meets every one)
    score: float  # the goal's figure, geometric mean over the points (higher is better)
    broken: tuple[str, ...] = ()  # each objective it breaks, in words
    near: tuple[str, ...] = ()  # each objective its figure meets or breaks within that figure's error, in words
    broken_beyond: bool = True  # it breaks some objective by more than that figure's error (where it breaks one)
    # The goal's figure were every request to meet every objective (its requests/s completed): the most
    # its goodput could be were a bound it breaks within the error in fact met. None: not known.
    ceiling: Optional[float] = None


def near_bounds(checks: Iterable[tuple[Objective, float]], errors: Mapping[str, float]) -> tuple[tuple[str, ...],
                                                                                                    bool]:
    """Of a layout's worst figure for each objective (`checks`), which are within the predictor's error
    of the bound, in words, and whether one breaks its bound beyond it. `errors`: the held-out median
    error by the figure's name (uncertainty.py; a figure never measured has none, and its bound is
    taken as exact). A prediction P off by a share e of the truth T lies in [T(1 - e), T(1 + e)], so
    T may be on the other side of the bound B wherever B(1 - e) < P <= B(1 + e)."""
    near, beyond = [], False
    for o, worst in checks:
        e = errors.get(o.field, 0.0)
        if worst > o.bound_ms * (1 + e):
            beyond = True
        elif e and worst > o.bound_ms * (1 - e):
            near.append(f"{o.label} {worst:,.0f} ms against its {o.bound_ms:,g} ms bound, within the predictor's "
                        f"{e:.0%} error of it")
    return tuple(near), beyond


def key(s: Standing) -> tuple:
    """The ranking's order (this module's docstring): sorted ascending, the best first."""
    return (not s.meets, s.preempting, s.over if not s.meets else 0.0, -s.score)


@dataclass(frozen=True)
class Compared:
    better: Standing  # the one that ranks first
    worse: Standing
    decisive: bool  # False: they tie within the uncertainty (or both break an objective)
    why: str  # what decides it, in words
    gap: float  # the goal's figure: how much better `better` is, as a fraction of `worse`'s


def compare(a: Standing, b: Standing, threshold: float, figure: str = "goodput") -> Compared:
    """Which of `a` and `b` ranks first, and whether by more than the uncertainty `threshold` (a
    fraction of the goal's `figure`)."""
    better, worse = (a, b) if key(a) <= key(b) else (b, a)
    gap = better.score / worse.score - 1 if worse.score > 0 else float("inf")
    if better.meets != worse.meets:
        said = f"{worse.label} breaks {'; '.join(worse.broken)}, {better.label} meets every objective"
        if better.near:  # it may break one: its goodput falls off a cliff there, so nothing is sure
            return Compared(better, worse, False, f"{said}, but too close to call: {'; '.join(better.near)}", gap)
        if worse.broken_beyond:
            return Compared(better, worse, True, said, gap)
        # It may meet what it breaks; then the better leads only by more goodput than it could have.
        if worse.ceiling is not None and better.score > worse.ceiling * (1 + threshold):
            return Compared(better, worse, True, f"{said}; and even if {worse.label} met them all, "
                            f"{_more(better.score / worse.ceiling - 1, figure)} than its requests could give, beyond "
                            f"the uncertainty of {threshold:.0%}", gap)
        return Compared(better, worse, False, f"{said}, but too close to call: {'; '.join(worse.near)}", gap)
    if not better.meets:
        return Compared(better, worse, False, f"neither meets every objective ({better.label} breaks "
                        f"{'; '.join(better.broken)}; {worse.label} breaks {'; '.join(worse.broken)})", gap)
    if better.preempting != worse.preempting:
        return Compared(better, worse, True, f"{worse.label} runs only by preempting (its KV does not fit the load), "
                        f"{better.label} does not", gap)
    if gap > threshold:
        return Compared(better, worse, True, f"{_more(gap, figure)}, beyond the uncertainty of {threshold:.0%}", gap)
    return Compared(better, worse, False, f"{percent(gap)} apart on {figure}, within the uncertainty of "
                    f"{threshold:.0%}", gap)


def percent(x: float) -> str:
    """A share as the verdict and advise's text word it: one decimal below 10%."""
    return f"{x:.1%}" if x < 0.1 else f"{x:.0%}"


def listed(words: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _more(gap: float, figure: str) -> str:
    """A lead in words: a share below three times as much ("50% more goodput"), a ratio from there
    ("12.3x as much goodput"), and "all the goodput" where the other has none."""
    if gap == float("inf"):
        return f"all the {figure} (the other has none)"
    return f"{percent(gap)} more {figure}" if gap < 2 else f"{gap + 1:.1f}x as much {figure}"


@dataclass(frozen=True)
class Separation:
    """Whether separating prefill and decode pays, from the best layout of each kind."""

    aggregated: Optional[Standing]
    separated: Optional[Standing]
    compared: Optional[Compared]

    @property
    def answer(self) -> str:
        """"pays", "does not pay", "ties" (within the uncertainty, or too close to call), "neither meets" or
        "not compared"."""
        c = self.compared
        if c is None:
            return "not compared"
        if not c.better.meets:
            return "neither meets"
        if not c.decisive:
            return "ties"
        return "pays" if c.better is self.separated else "does not pay"


def separation(aggregated: Optional[Standing], separated: Optional[Standing], threshold: float,
               figure: str = "goodput") -> Separation:
    both = aggregated is not None and separated is not None
    return Separation(aggregated, separated, compare(aggregated, separated, threshold, figure) if both else None)
