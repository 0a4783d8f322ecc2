"""Kubernetes resource quantities ('64Gi', '15500m', '1e3'), parsed exactly into fractions.

The grammar of k8s.io/apimachinery `resource.Quantity`: a signed decimal number, then a binary SI
suffix (Ki, Mi, Gi, Ti, Pi, Ei), a decimal SI suffix (n, u, m, k, M, G, T, P, E) or a decimal
exponent (e3, E-2). Kept here rather than in infra/units.py, whose byte parser serves the stack
files; this one reads what the API server reports (allocatable CPU in millicores, for one).
"""

from __future__ import annotations

import re
from fractions import Fraction

_QUANTITY = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(text: object) -> Fraction:
    """'16265620Ki' -> 16655994880, '15500m' -> 31/2, '1e3' -> 1000. ValueError when not a quantity."""
    if isinstance(text, int) and not isinstance(text, bool):
        return Fraction(text)
    match = _QUANTITY.match(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. 64Gi, 15500m, 4, 1e3)")
    sign, number, suffix = match.groups()
    value = Fraction(number if not number.endswith(".") else number[:-1])
    suffix = suffix or ""
    if suffix in _BINARY:
        value *= _BINARY[suffix]
    else:
        exponent = _DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:])
        value *= Fraction(10) ** exponent
    return -value if sign == "-" else value


def fmt_cpu(cores: Fraction) -> str:
    """CPU as Kubernetes writes it: whole cores ('9'), else millicores ('1500m')."""
    if cores.denominator == 1:
        return str(cores.numerator)
    milli = cores * 1000
    return f"{milli.numerator // milli.denominator}m" if milli.denominator == 1 else f"{float(cores):g}"
