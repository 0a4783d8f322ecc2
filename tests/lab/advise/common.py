"""What the advise tests share: the lab's cluster, a base stack file's config, and a search."""

from __future__ import annotations

import copy
import dataclasses
import functools
from fractions import Fraction
from typing import Any, Optional

import yaml

from dynamo_lab.advise import candidates, inputs, search, text
from dynamo_lab.advise.traffic import Traffic
from dynamo_lab.advise.uncertainty import MetricError, Uncertainty
from dynamo_lab.preflight import cluster_data
from dynamo_lab.preflight.cluster_data import ClusterData, Node
from tests.helpers import ROOT

LAB = cluster_data.read_file(str(ROOT / "tests" / "data" / "preflight" / "lab.json"))
# Not the validation's figures (tests that need those compute them): ranking never reads them, and
# a tie within the uncertainty is tested with these.
FIXED = Uncertainty({m: MetricError(0.1, 0.2, 0.2, 0.5, 16) for m in ("ttft_p50_ms", "ttft_p99_ms", "requests_per_s")})
CHEAP = (1, 1)  # one simulated graph, one measured run per point: for what does not test the figures
# Output tokens a request for a test whose property does not rest on the requests' length: the
# simulation takes a decode step a token, so 8 costs a fraction of the benchmark's 64 (a search of
# small_lab at concurrency 4: 0.2 s of CPU against 0.75 s). A pool that must fill, or arrivals that
# must outrun a layout, keep 64.
SHORT = 8


def base(stack: str = "kv-routing") -> dict[str, Any]:
    """A shipped stack file's `config:` map, as advise reads it (each caller's own copy)."""
    return copy.deepcopy(_config_map((ROOT / f"Pulumi.{stack}.yaml").read_text()))


@functools.cache
def _config_map(text: str) -> dict[str, Any]:
    # Parsed once per file text and process: 48 calls parsed the same four files again.
    return yaml.safe_load(text)["config"]


def point(prefix_types: int, concurrency: int, input_tokens: int = 2371, prefix_tokens: int = 2000,
          output_tokens: int = 64) -> Traffic:
    return Traffic(input_tokens, prefix_tokens, output_tokens, (prefix_types,), (concurrency,), given=True)


def advise(config: Optional[dict] = None, data: ClusterData = LAB, traffic: Optional[Traffic] = None,
           goal: Optional[inputs.Goal] = None, full: tuple[int, int] = CHEAP,
           name: str = "advised", base_name: str = "kv-routing") -> search.Advice:
    """A search of `config` (default: base_name's file) on `data` for the traffic (default: the
    base's benchmark) and the goal (default: TTFT p50). In this process: the test runner already
    runs a process per core, and the pool gives the same figures (tests/lab/predict/test_pool.py)."""
    b = inputs.Base.of(base_name, config or base(base_name))
    return search.search(b, name, data, traffic or inputs.traffic_of(b.config), goal or inputs.Goal(),
                         FIXED, full=full, workers=1)


def gpu_node(name: str, gpu_mib: int, units: int, memory_gib: float, cpus: int = 16, **labels: str) -> Node:
    return Node(name, {"kubernetes.io/hostname": name, "nvidia.com/gpu.memory": str(gpu_mib), **labels},
                {"cpu": Fraction(cpus), "memory": Fraction(int(memory_gib * 2**30)), "nvidia.com/gpu": Fraction(units),
                 "pods": Fraction(110)})


def with_nodes(*nodes: Node) -> ClusterData:
    """The lab's cluster (its version, namespaces, storage classes) with these nodes instead."""
    return dataclasses.replace(LAB, nodes=list(nodes), source="generated")


def family(a: search.Advice, name: str) -> search.Family:
    return next(f for f in a.families if f.name == name)


def small_lab() -> ClusterData:
    """The lab's nodes with 2 GPU units each instead of 4: 18 layouts instead of 68, for the tests
    that check what advise says rather than how far it searches."""
    return with_nodes(gpu_node("gpu-server", 24576, 2, 62.6), gpu_node("gpu-laptop", 8192, 2, 15.4))


def fake_candidate(label: str, score: float) -> search.Candidate:
    c = search.Candidate(candidates.Layout(candidates.AGGREGATED, (candidates.Group(label, "agg", "gpu-24gb", 1),)), {})
    c.score = score
    return c


def verdict_line(a: search.Advice) -> str:
    return next(ln for ln in text.text(a).splitlines()
                if ln.startswith(("Recommended", "Tied within", "No recommendation", "First, not recommended")))
