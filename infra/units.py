"""Byte and rate quantities as Kubernetes and network people write them.

Kubernetes quantities: binary suffixes (Ki, Mi, Gi, Ti) are powers of 1024, decimal suffixes
(k, M, G, T) powers of 1000; see k8s.io/apimachinery resource.Quantity. A plain integer is bytes.
Kept free of Pulumi and pydantic so the sizing arithmetic can be property-tested on its own.
"""

from __future__ import annotations

import math
import re

_SUFFIX = {
    "": 1,
    "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
}
_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKMGT]i?|)\s*[bB]?\s*$")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(bit|bps)\s*$", re.IGNORECASE)

MI = 2**20
GI = 2**30


def parse_bytes(value: object) -> int:
    """'3584Mi' -> 3758096384, '1G' -> 10**9, 4096 -> 4096. Raises ValueError with the accepted forms."""
    if isinstance(value, bool):
        raise ValueError(f"expected a byte quantity, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a byte quantity cannot be negative, got {value}")
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str):
        match = _QUANTITY.match(value)
        if match:
            number, suffix = match.groups()
            # Decimal arithmetic on the digits keeps '1.5Gi' exact (no float rounding).
            whole, _, frac = number.partition(".")
            scale = 10 ** len(frac)
            exact = (int(whole) * scale + int(frac or 0)) * _SUFFIX[suffix]
            return math.ceil(exact / scale)
    raise ValueError(
        f"{value!r} is not a byte quantity; write an integer number of bytes or a number with a "
        "Kubernetes suffix, e.g. 3584Mi, 10Gi, 272M, 1G"
    )


def parse_rate_bits(value: object) -> int:
    """'1gbit' -> 10**9 bits/s (tc and Ethernet use decimal prefixes)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return int(value)
    if isinstance(value, str):
        match = _RATE.match(value)
        if match:
            number, prefix, _ = match.groups()
            factor = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[prefix.lower()]
            bits = float(number) * factor
            if bits > 0:
                return int(bits)
    raise ValueError(f"{value!r} is not a link rate; write e.g. 1gbit, 10gbit, 100mbit")


def to_mi_quantity(nbytes: int) -> str:
    """Bytes rounded UP to whole MiB, as a Kubernetes quantity: a limit is never below the figure."""
    return f"{math.ceil(nbytes / MI)}Mi"


def fmt_bytes(nbytes: float) -> str:
    """Human figure for messages and tables: 3.5Gi, 259.3Mi, 512Ki."""
    for unit, size in (("Gi", GI), ("Mi", MI), ("Ki", 2**10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.1f}{unit}"
    return f"{int(nbytes)}B"


def fmt_si_bytes(nbytes: float) -> str:
    """Decimal figure, as the write-up and link rates use: 271.9MB."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.1f}{unit}"
    return f"{int(nbytes)}B"
