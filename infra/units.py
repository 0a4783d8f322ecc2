"""Quantities as Kubernetes reads them (memory, CPU) and link rates as tc and Ethernet write them.

Kubernetes quantities follow k8s.io/apimachinery `resource.Quantity`: a number with no spaces
(`12`, `1.5`, `.5`, `+2`), then an optional suffix: binary `Ki Mi Gi Ti Pi Ei` (powers of 1024),
decimal `n u m k M G T P E` (powers of 1000; `m` is milli, `k` is lower case), or an exponent
`e3`/`E-2`. Anything else is refused with what the text would have meant, never guessed at: a
plain number is bytes to Kubernetes, `GB` and `K` are not suffixes, and `10 Gi` has a space.
Kept free of Pulumi and pydantic so the arithmetic can be property-tested on its own.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

MI = 2**20
GI = 2**30

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1,
            "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
# Number and suffix of something that looks like a quantity, to say what it would have meant.
_LOOSE = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+))\s*([A-Za-z]*)\s*$")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(bit|bps)\s*$", re.IGNORECASE)


# resource.Quantity: "no quantity may represent a number greater than 2^63-1 in magnitude".
QUANTITY_MAX = 2**63 - 1


class QuantityError(ValueError):
    pass


class QuantityRangeError(QuantityError):
    """A well-formed quantity beyond the range Kubernetes allows."""


def _text(value: object) -> str:
    """A value as a message quotes it: its text, stripped, and cut short past 60 characters; never
    written out past Python's 4,300 digits, where str() of an int raises a ValueError."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1:,} digits"
    text = str(value).strip()
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text):,} characters)"


def _not_text(value: object) -> str:
    """What a value that is no quantity's text is, in words ("" for text and numbers): the stack file's
    spelling of a boolean (a YAML `true`, which Python spells True), or its kind."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    return {dict: "a map", list: "a list", type(None): "null"}.get(type(value), "")


def _too_large(text: object) -> QuantityRangeError:
    return QuantityRangeError(f"{_text(text)!r} is more than Kubernetes allows in a quantity (2^63-1)")


# Digits a quantity's number may have: 2^63-1 has 19 before the point, and a nano (`n`, the finest
# suffix) is 9 after it; far past both is a mistake, and Python's Fraction cannot even read one of
# more than 4,300 digits (sys.get_int_max_str_digits).
MAX_WHOLE_DIGITS = 40
MAX_FRACTION_DIGITS = 40


def _in_range(text: object, value: Fraction) -> Fraction:
    if abs(value) > QUANTITY_MAX:
        raise _too_large(text)
    return value


def parse_quantity(text: object) -> Fraction:
    """A Kubernetes quantity's exact value; QuantityError when Kubernetes would not accept it."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):  # True is an int to Python
        raise QuantityError(f"{_not_text(text)} is not a Kubernetes quantity")
    if isinstance(text, int):
        return _in_range(text, Fraction(text))
    if isinstance(text, float):
        text = repr(text)
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"{_text(text)!r} is not a Kubernetes quantity")
    sign, number, suffix = match.groups()
    whole, _, fraction = number.partition(".")
    if len(whole.lstrip("0")) > MAX_WHOLE_DIGITS:
        raise _too_large(text)
    if len(fraction.rstrip("0")) > MAX_FRACTION_DIGITS:
        raise QuantityError(f"{_text(text)!r} has {len(fraction):,} digits after the point, finer than any "
                            "quantity Kubernetes keeps (a nano, n, is 9); write it shorter")
    value = Fraction(f"{whole or 0}.{fraction.rstrip('0') or 0}")
    suffix = suffix or ""
    if suffix in _BINARY:
        value *= _BINARY[suffix]
    elif suffix in _DECIMAL:
        value *= _DECIMAL[suffix]
    else:  # e3, E-2; an exponent past any quantity's range is refused before it is computed
        exponent = int(suffix[1:])
        if exponent > 40 or len(number) > 40:
            raise _too_large(text)
        value *= Fraction(10) ** max(exponent, -40)
    return _in_range(text, -value if sign == "-" else value)


def _n(value: Fraction | int) -> str:
    return f"{int(value):,}" if Fraction(value).denominator == 1 else f"{float(value):,.3f}"


def _meant(text: str, unit: str) -> str:
    """What a refused text would have been read as, or what its author likely meant."""
    loose = _LOOSE.match(text)
    if not loose:
        return ""
    number, suffix = loose.groups()
    if " " in text.strip():
        try:
            value = parse_quantity(number + suffix)
            return (f"; Kubernetes allows no spaces in a quantity: write {number}{suffix} "
                    f"({_n(value)} {unit})")
        except QuantityError:
            pass
    head = suffix[:1].upper() if suffix[:1].lower() in "kmgtpe" else ""
    if not head:
        return ""
    options = []
    for candidate in (("k" if head == "K" else head), head + "i"):
        try:
            options.append(f"{number}{candidate} is {_n(parse_quantity(number + candidate))} {unit}")
        except QuantityError:
            continue
    return f"; Kubernetes knows no suffix {suffix}: {' and '.join(options)}" if options else ""


def _parse_or_explain(value: object, text: str, unit: str, kind: str, example: str) -> Fraction:
    """parse_quantity, refusing `text` with what it would have meant, else how a `kind` is written."""
    if _not_text(value):  # a boolean, a map, a list, null: no text to say what it would have meant
        raise QuantityError(f"{_not_text(value)} is not a Kubernetes {kind}. Write {example}")
    try:
        return parse_quantity(value)
    except QuantityRangeError:
        raise
    except QuantityError:
        meant = _meant(text, unit) or f". Write {example}"
        raise QuantityError(f"{text!r} is not a Kubernetes {kind}{meant}") from None


def _whole_bytes(value: object, minimum: int, unit: str, meant_suffix: str) -> int:
    text = _text(value)
    exact = _parse_or_explain(value, text, unit, "quantity",
                              "bytes with a Kubernetes suffix, e.g. 3584Mi, 10Gi, 272M, 1G")
    if exact < 0:
        raise QuantityError(f"{text!r} is negative; a byte quantity is 0 or more (e.g. 2Gi)")
    if exact.denominator != 1:
        milli = "; m means milli (a thousandth), so MB is M and MiB is Mi" if text.endswith("m") else ""
        raise QuantityError(f"{text!r} is {_n(exact)} {unit}, not a whole number{milli}")
    if exact < minimum:
        meant = (f"; if you meant {meant_suffix}B, write {text}{meant_suffix} "
                 f"({_n(exact * parse_quantity('1' + meant_suffix))} {unit})") if text.lstrip("+").isdigit() \
            and exact > 0 else ""
        raise QuantityError(f"{text!r} is {_n(exact)} {unit} (Kubernetes reads a number without a suffix as "
                            f"bytes), less than the {quantity(minimum) if unit == 'bytes' else _n(minimum)} "
                            f"{'' if unit == 'bytes' else unit + ' '}this needs{meant}")
    return int(exact)


def parse_memory(value: object, minimum: int = MI) -> int:
    """Bytes of a memory quantity: whole bytes, at least `minimum` (a plain number is bytes)."""
    return _whole_bytes(value, minimum, "bytes", "Mi")


def parse_throughput(value: object, minimum: int = 10**6) -> int:
    """Bytes per second as a quantity (`1200M` = 1.2 GB/s): whole, at least 1 MB/s."""
    return _whole_bytes(value, minimum, "bytes/s", "M")


def parse_cpu(value: object) -> int:
    """Millicores of a CPU quantity (`2`, `0.5`, `500m`): more than 0, no finer than 1m."""
    # A refusal quotes the value as written, spaces and all; the other messages quote it stripped.
    exact = _parse_or_explain(value, value if isinstance(value, str) and len(value) <= 60 else _text(value), "CPUs",
                              "CPU quantity", "cores or millicores, e.g. 2, 0.5, 500m")
    text = _text(value)
    milli = exact * 1000
    if milli <= 0:
        raise QuantityError(f"{text!r} is {_n(exact)} CPUs; write more than 0, e.g. 500m or 2")
    if milli.denominator != 1:
        raise QuantityError(f"{text!r} is finer than 1m (a thousandth of a CPU), which Kubernetes does not "
                            f"allow; write {math.ceil(milli)}m")
    return int(milli)


def quantity(nbytes: int) -> str:
    """Exact bytes as a Kubernetes quantity: NMi when whole MiB (as manifests show them), else NM when
    whole megabytes (8000M stays 8000M), else NKi, else N."""
    for suffix, size in (("Mi", MI), ("M", 10**6), ("Ki", 2**10)):
        if nbytes % size == 0 and nbytes >= size:
            return f"{nbytes // size}{suffix}"
    return str(nbytes)


def written(nbytes: int) -> str:
    """A byte figure as a user would write it in a stack file: 5837Mi when whole MiB, else the bytes."""
    text = quantity(nbytes)
    return text if text.endswith(("Mi", "Ki")) else f"{nbytes:,} bytes"


def format_cpu(millicores: int) -> str:
    """Millicores as Kubernetes writes them: whole cores as `2`, else `500m`."""
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def ceil_mi(nbytes: float) -> int:
    """Bytes rounded UP to whole MiB: a computed limit is never below its figure."""
    return math.ceil(nbytes / MI) * MI


def to_mi_quantity(nbytes: float) -> str:
    """Bytes rounded UP to whole MiB, as a Kubernetes quantity."""
    return f"{ceil_mi(nbytes) // MI}Mi"


def parse_rate_bits(value: object) -> int:
    """'1gbit' -> 10**9 bits/s (tc and Ethernet use decimal prefixes): a finite rate of a bit a second
    or more (a float past its range, `1e400` or 400 digits of `gbit`, is infinite)."""
    example = "write e.g. 1gbit, 10gbit, 100mbit"
    if _not_text(value):  # True is an int to Python
        raise ValueError(f"{_not_text(value)} is not a link rate; {example}")
    if (isinstance(value, int) or isinstance(value, float) and math.isfinite(value)) and value > 0:
        return int(value)
    if isinstance(value, str):
        match = _RATE.match(value)
        if match:
            number, prefix, _ = match.groups()
            factor = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[prefix.lower()]
            bits = float(number) * factor
            if math.isfinite(bits) and bits >= 1:
                return int(bits)
    raise ValueError(f"{_text(value)!r} is not a link rate; {example}")


def human(nbytes: float) -> str:
    """Human figure for messages and tables: 3.5Gi, 259.3Mi, 512Ki."""
    for unit, size in (("Gi", GI), ("Mi", MI), ("Ki", 2**10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.1f}{unit}"
    return f"{int(nbytes)}B"


def human_si(nbytes: float) -> str:
    """Decimal figure, as the write-up and link rates use: 271.9MB."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.1f}{unit}"
    return f"{int(nbytes)}B"
