"""Quantities read exactly as Kubernetes reads them, and refused with what they would have meant."""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra import units

# The grammar of k8s.io/apimachinery resource.Quantity, transcribed from its documentation (not from
# infra/units.py), as an independent judge of what Kubernetes accepts.
K8S_QUANTITY = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?")


@pytest.fixture(scope="module")
def client_parse():
    """The official Kubernetes client's reading of a quantity, imported by the first test that asks
    (not in a hypothesis example, whose deadline the import would break): the client package takes
    0.4 s to import, which every test process paid while collecting."""
    from kubernetes.utils.quantity import parse_quantity

    return parse_quantity


numbers = st.from_regex(r"\A[+-]?(\d{1,6}(\.\d{0,3})?|\.\d{1,3})\Z")
suffixes = st.sampled_from(["", "Ki", "Mi", "Gi", "Ti", "n", "u", "m", "k", "M", "G", "T", "e3", "E-2",
                            "K", "KB", "GB", "gi", "Gib", "mi", "b", " Gi", "i", "kb", "MB"])


@given(n=st.integers(min_value=units.MI, max_value=2**50))
def test_bytes_round_trip(n):
    assert units.parse_memory(units.quantity(n)) == n


@given(m=st.integers(min_value=1, max_value=10**7))
def test_cpu_round_trip(m):
    assert units.parse_cpu(units.format_cpu(m)) == m


@given(text=st.builds(lambda n, s: n + s, numbers, suffixes) | st.text(max_size=8))
def test_every_accepted_quantity_is_one_kubernetes_accepts_with_the_same_value(client_parse, text):
    try:
        value = units.parse_quantity(text)
    except units.QuantityError:
        return
    assert K8S_QUANTITY.fullmatch(text), f"{text!r} accepted but not a Kubernetes quantity"
    assert Fraction(client_parse(text)) == value  # the official client reads the same number


@given(text=st.builds(lambda n, s: n + s, numbers, suffixes) | st.text(max_size=8))
def test_memory_is_whole_bytes_or_refused_with_a_reason(text):
    try:
        n = units.parse_memory(text)
    except units.QuantityError as exc:
        assert repr(text.strip()) in str(exc) or repr(text) in str(exc)
        return
    assert isinstance(n, int) and n >= units.MI


@pytest.mark.parametrize("text, meant", [
    ("10GB", "Kubernetes knows no suffix GB: 10G is 10,000,000,000 bytes and 10Gi is 10,737,418,240 bytes"),
    ("10 Gi", "Kubernetes allows no spaces in a quantity: write 10Gi (10,737,418,240 bytes)"),
    ("4096", "'4096' is 4,096 bytes (Kubernetes reads a number without a suffix as bytes), less than the 1Mi "
             "this needs; if you meant MiB, write 4096Mi (4,294,967,296 bytes)"),
    ("2K", "Kubernetes knows no suffix K: 2k is 2,000 bytes and 2Ki is 2,048 bytes"),
    ("3584mi", "Kubernetes knows no suffix mi: 3584M is 3,584,000,000 bytes and 3584Mi is 3,758,096,384 bytes"),
    ("10m", "'10m' is 0.010 bytes, not a whole number; m means milli (a thousandth), so MB is M and MiB is Mi"),
    ("1.5", "'1.5' is 1.500 bytes, not a whole number"),
    ("-1Gi", "'-1Gi' is negative; a byte quantity is 0 or more (e.g. 2Gi)"),
])
def test_refused_memory_says_what_it_would_have_meant(text, meant):
    with pytest.raises(units.QuantityError) as info:
        units.parse_memory(text)
    assert meant in str(info.value)


@pytest.mark.parametrize("text, value", [("3584Mi", 3584 * 2**20), ("1.5Gi", 3 * 2**29), ("272M", 272 * 10**6),
                                         ("1e9", 10**9), ("8589934592", 8 * 2**30), (8 * 2**30, 8 * 2**30)])
def test_accepted_memory(text, value):
    assert units.parse_memory(text) == value


@pytest.mark.parametrize("text, millicores", [("2", 2000), ("0.5", 500), ("500m", 500), ("1.25", 1250), (3, 3000)])
def test_accepted_cpu(text, millicores):
    assert units.parse_cpu(text) == millicores
    assert units.format_cpu(millicores) == {2000: "2", 3000: "3"}.get(millicores, f"{millicores}m")


@pytest.mark.parametrize("text, message", [
    ("0.0005", "finer than 1m (a thousandth of a CPU), which Kubernetes does not allow; write 1m"),
    ("2 cores", "'2 cores' is not a Kubernetes CPU quantity"),
    ("0", "'0' is 0 CPUs; write more than 0"),
])
def test_refused_cpu(text, message):
    with pytest.raises(units.QuantityError, match=re.escape(message)):
        units.parse_cpu(text)


def test_throughput_reads_a_bare_number_as_bytes_per_second_and_says_so():
    assert units.parse_throughput("119M") == 119 * 10**6
    with pytest.raises(units.QuantityError, match=re.escape("if you meant MB, write 119M (119,000,000 bytes/s)")):
        units.parse_throughput("119")


def test_link_rates():
    assert units.parse_rate_bits("1gbit") == 10**9
    assert units.parse_rate_bits("100mbit") == 10**8
    for bad in ("0gbit", "fast", "-1gbit"):
        with pytest.raises(ValueError, match="is not a link rate"):
            units.parse_rate_bits(bad)


def test_the_client_parser_used_as_a_judge_is_lax_so_the_grammar_check_is_needed(client_parse):
    assert client_parse(" 10") == Decimal(10)  # the client accepts a space; Kubernetes does not
    with pytest.raises(units.QuantityError):
        units.parse_quantity(" 10")


# The forms the API server reports (allocatable memory in Ki, CPU in millicores, exponents).
@pytest.mark.parametrize("text, value", [
    ("65674372Ki", 65674372 * 1024), ("16", 16), ("15500m", Fraction(31, 2)), ("1.5Gi", 3 * 2**29),
    ("129M", 129_000_000), ("1e3", 1000), ("1E3", 1000), ("5e-3", Fraction(1, 200)), ("2E", 2 * 10**18),
    (".5", Fraction(1, 2)), ("1.", 1), ("+4", 4), ("-3m", Fraction(-3, 1000)), ("100n", Fraction(1, 10**7)),
    ("250u", Fraction(1, 4000)), ("2Ti", 2 * 2**40), ("3k", 3000), ("0", 0),
])
def test_quantities_parse_exactly(text, value):
    assert units.parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "1GiB", "1 Gi", "1e", "1.2.3", "0x10", "1K", "ten", None])
def test_what_is_not_a_quantity_is_refused(text):
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        units.parse_quantity(text)
