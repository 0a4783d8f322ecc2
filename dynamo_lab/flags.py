"""The values the command line's flags accept, as argparse types: each refuses anything else with
one line that says what to write (cli.py)."""

from __future__ import annotations

import argparse
import re
from typing import Callable, Optional

from infra.units import parse_memory


class Parser(argparse.ArgumentParser):
    """argparse, refusing a command line in one line worded as every other refusal of the lab's
    command line (`error: dynamo-lab COMMAND: ...`), with where the usage is instead of the usage
    block: a flag's own message already says what to write (this module's types). cli.py's parser
    and the local cluster's (local_cluster/__main__.py) are both this."""

    # What an argument this command does not take was likely meant as, worded `argument FLAG: why,
    # the fix` (None: not one it knows); without one, argparse's `unrecognized arguments`.
    unknown_hint: Optional[Callable[[str], Optional[str]]] = None

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message} (usage: {self.prog} --help)\n")

    def parse_known_args(self, args=None, namespace=None):
        """As argparse's, refusing what this parser does not take itself: a subcommand's parser hands
        its leftovers to the top-level one, whose refusal named `dynamo-lab`, not the command."""
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            hints = [hint for arg in extras if self.unknown_hint and (hint := self.unknown_hint(arg))]
            self.error(hints[0] if hints else f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def positive_bytes(text: str) -> int:
    try:
        return parse_memory(text, minimum=1)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_int(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: write a positive integer")
    return int(text)


def positive_number(unit: str):
    """An argparse type: a positive, finite number of `unit`."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r}: write a positive number of {unit}")
        return value
    return parse


positive_seconds = positive_number("seconds")
positive_ms = positive_number("milliseconds")


# advise's objective flags, `--METRIC-pQ-max` (the percentiles the predictor reports: 50 and 99).
OBJECTIVE_FLAG = re.compile(r"--(?P<metric>[a-z0-9]+)-p(?P<percentile>[0-9.]+)-max(=.*)?")


class ObjectiveBound(argparse.Action):
    """An objective's bound in milliseconds (`--METRIC-pQ-max MS`, its type positive_ms), given
    once: argparse keeps the last of a repeated flag silently, so a bound earlier on the line would
    vanish. A p50 bound may not exceed its metric's p99 bound: a p50 is never above its p99, so the
    p50's would bound nothing."""

    def __call__(self, parser, namespace, value, option_string=None):
        given = getattr(namespace, self.dest, None)
        if given is not None:
            raise argparse.ArgumentError(self, f"given twice ({given:,g} and {value:,g} ms): give each objective "
                                         "once")
        p50 = "_p50_" in self.dest
        other = self.dest.replace("_p50_", "_p99_") if p50 else self.dest.replace("_p99_", "_p50_")
        bound, flag = getattr(namespace, other, None), "--" + other.replace("_", "-")
        if bound is not None and (value > bound if p50 else value < bound):
            if p50:
                why = f"{value:,g} ms is above {flag}'s {bound:,g} ms"
                fix = f"give at most {bound:,g} ms here, or drop this bound"
            else:
                why = f"{value:,g} ms is below {flag}'s {bound:,g} ms"
                fix = f"give at least {bound:,g} ms here, or drop {flag}"
            raise argparse.ArgumentError(self, f"{why}: a p50 is never above its p99, so the p50's bound would "
                                         f"bound nothing; {fix}")
        setattr(namespace, self.dest, value)


# The slowest open loop simulated: a run's 128 requests at 0.1/s already span about 21 minutes of
# simulated time, and the answer below it (every layout serves each request alone) needs no search.
MIN_RATE = 0.1


def _once(text: str, values: list) -> list:
    """`values` with none given twice: a repeated point would be simulated and weighted twice."""
    seen = [v for i, v in enumerate(values) if v in values[:i]]
    if seen:
        raise argparse.ArgumentTypeError(f"{text!r}: {seen[0]:g} is given twice: give each value once")
    return values


def rate_list(text: str) -> list[float]:
    """Requests per second, one or more, separated by commas (an open-loop load), each once."""
    parse = positive_number("requests per second")
    values = [parse(v) for v in text.split(",")]
    slow = [v for v in values if v < MIN_RATE]
    if slow:
        raise argparse.ArgumentTypeError(f"{text!r}: {slow[0]:g} requests/s is slower than the open loop simulated "
                                         f"({MIN_RATE:g}/s, 128 requests a run): write at least {MIN_RATE:g}")
    return _once(text, values)


def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: write positive integers separated by commas") from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: write positive integers separated by commas")
    return _once(text, values)


def nonnegative_int(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r}: write a whole number, 0 or more")
    return int(text)
