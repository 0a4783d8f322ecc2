"""The values the command line's flags accept, as argparse types: each refuses anything else with
one line that says what to write (cli.py)."""

from __future__ import annotations

import argparse

from infra.units import parse_memory


class Parser(argparse.ArgumentParser):
    """argparse, refusing a command line in one line worded as every other refusal of the lab's
    command line (`error: dynamo-lab COMMAND: ...`), with where the usage is instead of the usage
    block: a flag's own message already says what to write (this module's types). cli.py's parser
    and the local cluster's (cluster/__main__.py) are both this."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message} (usage: {self.prog} --help)\n")


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
