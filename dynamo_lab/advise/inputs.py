"""What `advise` is asked: the base stack (read and loaded once), the traffic to rank layouts for,
the goal; and the checks of a given traffic, made once, before the cluster is read.

`Traffic` (traffic.py) is not the stack file's `workload` section (infra/config/workload.py, the one point a
variant is sized for): it is a request shape over a matrix of (prefix types, concurrency) points,
the base stack's `benchmark` section by default. A given traffic sets a candidate's `workload` to
its largest point and its `benchmark` to its matrix (stack_file.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from pydantic import ValidationError

from dynamo_lab import stack_files
from dynamo_lab.advise.stack_file import StackDoc, with_traffic
from dynamo_lab.advise.traffic import Traffic
from dynamo_lab.predict.objectives import DEFAULT_OBJECTIVES, Objective
from infra.config.schema import StackConfig
from infra.config.schema import Workload as SizedWorkload
from infra.errors import ConfigError, UserError
from infra.load import load as load_config
from infra.plan import Stack, load_stack

# The most requests in flight advise simulates: each is simulated, and the lab ran 4 and 8.
MAX_CONCURRENCY = 64
# The most points (prefix types x concurrency or rates) advise simulates: every layout is simulated
# at each, and the shipped stacks' benchmark has 8.
MAX_POINTS = 32


@dataclass(frozen=True)
class Base:
    """The base stack: its file's `config:` map as written (every candidate is it, with other
    workers), and that map loaded and sized."""

    name: str
    doc: StackDoc
    stack: Stack

    @property
    def config(self) -> StackConfig:
        return self.stack.config

    @classmethod
    def of(cls, name: str, doc: StackDoc) -> "Base":
        return cls(name, doc, load_stack(name, *stack_files.config_from_doc(doc)))  # a ConfigError names its key


def read_base(name: str) -> Base:
    """Pulumi.<name>.yaml, read once."""
    return Base.of(name, stack_files.stack_doc(name))


def traffic_of(cfg: StackConfig) -> Traffic:
    """A stack's own traffic: its benchmark section."""
    b = cfg.benchmark
    return Traffic(b.prefix_tokens + b.unique_tokens, b.prefix_tokens, b.output_tokens, tuple(b.prefix_types),
                   tuple(b.concurrency), given=False)


def given_traffic(base: Base, input_tokens: Optional[int] = None, prefix_tokens: Optional[int] = None,
                  output_tokens: Optional[int] = None, prefix_types: Optional[list[int]] = None,
                  concurrency: Optional[list[int]] = None, rates: Optional[list[float]] = None) -> Optional[Traffic]:
    """The base's traffic with what the command line gives (None when it gives nothing), checked:
    a UserError (exit 2) for a traffic no layout could serve. `rates` (--rate) makes it open loop;
    the candidates are still sized, as for any given traffic, for the largest concurrency (--concurrency,
    else the base's benchmark list), which the predictor then does not simulate."""
    flags = {"input_tokens": input_tokens, "prefix_tokens": prefix_tokens, "output_tokens": output_tokens,
             "prefix_types": prefix_types, "concurrency": concurrency, "rates": rates}
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in flags.items() if v is not None}
    if not given:
        return None
    traffic = dataclasses.replace(traffic_of(base.config), **given, given=True)
    _prefix_within_input(base, traffic)
    return traffic


def _prefix_within_input(base: Base, t: Traffic) -> None:
    """The stack file's own rule, that the shared prefix is part of the input (its `workload`
    model's), worded for the flags that set them."""
    try:
        # The one rule of the two that can fail: the flags are positive (the prefix 0 or more).
        SizedWorkload(inputTokens=t.input_tokens, prefixTokens=t.prefix_tokens)
    except ValidationError:
        raise UserError(f"the shared prefix ({t.prefix_tokens:,} tokens: --prefix-tokens, else {base.name}'s "
                        f"benchmark) is not less than the input ({t.input_tokens:,}: --input-tokens): the prefix is "
                        "part of each prompt. Lower --prefix-tokens (0: no shared prefix) or raise "
                        "--input-tokens") from None


FLAGS = ("--input-tokens is workload.inputTokens, --prefix-tokens workload.prefixTokens, --output-tokens "
         "workload.outputTokens, --prefix-types and --concurrency workload's largest and benchmark's lists")

# The most requests/s advise simulates arriving: a faster rate floods any layout of a small cluster,
# and the answer (all of them queue without bound) needs no search.
MAX_RATE = 1000.0


def check_traffic(base: Base, traffic: Traffic) -> None:
    """A traffic that no layout could serve (longer than the model's context, say) is the user's
    input to fix, not 68 refusals: say so once (exit 2)."""
    if max(traffic.concurrency) > MAX_CONCURRENCY:
        # With --rate the concurrency is not simulated, only sized for.
        does, why = (("sizes layouts for", "with --rate, --concurrency is what each layout is sized for")
                     if traffic.open_loop else
                     ("simulates", "each request is simulated, and a search would take many minutes"))
        raise UserError(f"concurrency {max(traffic.concurrency)} is more than advise {does} ({MAX_CONCURRENCY} "
                        f"requests in flight; {why}): ask for at most {MAX_CONCURRENCY}")
    if len(traffic.points) > MAX_POINTS:
        raise UserError(f"{len(traffic.points)} points is more than advise simulates ({MAX_POINTS}; every layout is "
                        f"simulated at each, prefix types x {'rates' if traffic.open_loop else 'concurrency'}): give "
                        "fewer --prefix-types, --concurrency or --rate values")
    if traffic.rates and max(traffic.rates) > MAX_RATE:
        raise UserError(f"--rate {max(traffic.rates):g} requests/s is more than advise simulates ({MAX_RATE:g}/s): "
                        f"ask for at most {MAX_RATE:g}")
    if not traffic.given:
        return
    raw, secrets = stack_files.config_from_doc(with_traffic(base.doc, traffic))
    try:
        load_config(raw, base.name, secrets)
    except ConfigError as exc:
        mine = [f"{key}: {message}" for key, message in exc.problems if key.startswith(("workload.", "benchmark."))]
        if mine:
            raise UserError(f"no layout can serve the workload given ({FLAGS}): " + "; ".join(mine)) from None


GOALS = {"goodput": "the most goodput: requests/s meeting every objective",
         "goodput-per-gpu": "the most goodput per GPU: output tokens/s meeting every objective, per GPU the layout "
                            "takes"}
# The goals advise once had, and why each is gone: a flag that meant something else now is refused.
RETIRED_GOALS = {
    "ttft-p50": "advise ranks by goodput under objectives now, not by the lowest TTFT p50: bound it with "
                "--ttft-p50-max MS (and --ttft-p99-max, --itl-p99-max, ...) and keep --goal goodput (the default)",
    "requests-per-s": "advise ranks by goodput now, the requests/s that meet every objective: use --goal goodput (the "
                      "default), or lift an objective you do not want with a bound no layout reaches",
}


def goal_refusal(name: str) -> Optional[str]:
    """Why `name` is no goal a search ranks by (a retired one: what replaces it), or None."""
    if name in RETIRED_GOALS:
        return f"{RETIRED_GOALS[name]} (docs/advise.md, Objectives and goodput)"
    if name not in GOALS:
        return f"not a goal; choose {' or '.join(GOALS)}"
    return None


def objectives_given(given: dict[str, Optional[float]]) -> tuple[Objective, ...]:
    """The objectives of a search: those the command line gives (`given`: flag field, e.g. `ttft_p99`,
    to milliseconds or None), and each default whose metric none of them bounds."""
    mine = tuple(Objective(key.split("_")[0], int(key.split("_p")[1]), ms) for key, ms in given.items()
                 if ms is not None)
    bounded = {o.metric for o in mine}
    return tuple(o for o in DEFAULT_OBJECTIVES if o.metric not in bounded) + mine


@dataclass(frozen=True)
class Goal:
    """What a search ranks by (a key of GOALS), among the layouts that meet every objective."""

    name: str = "goodput"
    objectives: tuple[Objective, ...] = DEFAULT_OBJECTIVES

    def __post_init__(self) -> None:
        why = goal_refusal(self.name)
        if why is not None:
            raise UserError(f"--goal {self.name}: {why}")

    @property
    def metric(self) -> str:
        """What the ranking reads per point: Candidate.value's name."""
        return "goodput_requests_per_s" if self.name == "goodput" else "goodput_tokens_per_s_per_gpu"

    @property
    def label(self) -> str:
        return "goodput" if self.name == "goodput" else "goodput per GPU"

    @property
    def unit(self) -> str:
        return "requests/s" if self.name == "goodput" else "output tokens/s per GPU"

    def describe(self) -> str:
        bounds = "; ".join(o.describe() for o in self.objectives)
        return f"{GOALS[self.name]} ({bounds}, at every point)" if bounds else GOALS[self.name]
