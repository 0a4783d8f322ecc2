"""Each fact a stack derives has one definition: a second builder of any of them fails here.

The names derived from the graph's live in infra/names.py; the groups that run workers, each
group's context length, the cache's locations, the model's weight and KV bytes, what one rank of a
worker holds (`Ranks`) and the engine settings its flags give (`EngineSettings`) in
infra/resolved.py; the GPUs and devices a pod takes in infra/placement/. A module that builds one
of them again (an f-string `{graph}-model-cache...`, a `replicas > 0` filter, its own reading of
`--max-model-len` or `--max-num-seqs`, parameters x dtype bytes, a figure divided or multiplied by
tensorParallel) drifts from the one the checks judged; this test reads every module of both
packages, the program's and the toolbox's, and names the line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import ROOT, syntax_nodes

INFRA = ROOT / "infra"
PACKAGES = (INFRA, ROOT / "dynamo_lab")
NAMES, RESOLVED, PLACEMENT = "infra/names.py", "infra/resolved.py", "infra/placement/__init__.py"

# A graph-derived name's template: the text that follows the graph's (or the namespace's) name.
NAME_SUFFIXES = ("-model-cache", "-kv-probe", "-model-pull", "-frontend", "-bench")
NAME_PREFIXES = ("dynamo-lab-",)  # the default graph namespace, `dynamo-lab-<stack>`
# Where a group's own context length may be read from its extraArgs: where it is resolved, and the
# check that refuses one that is not a token count (it quotes what the user wrote).
CONTEXT_READERS = {RESOLVED, "infra/validate/__init__.py"}


def _derived_name(node: ast.JoinedStr) -> bool:
    parts = node.values
    for before, after in zip(parts, parts[1:], strict=False):
        if isinstance(before, ast.FormattedValue) and isinstance(after, ast.Constant) \
                and str(after.value).startswith(NAME_SUFFIXES):
            return True
        if isinstance(before, ast.Constant) and isinstance(after, ast.FormattedValue) \
                and str(before.value).endswith(NAME_PREFIXES):
            return True
    return False


def _active_filter(node: ast.Compare) -> bool:
    """`x.replicas > 0`, `x.replicas >= 1`, `x.replicas != 0`: the groups that run, worked out again."""
    if not (isinstance(node.left, ast.Attribute) and node.left.attr == "replicas" and len(node.ops) == 1):
        return False
    (op,), (right,) = node.ops, node.comparators
    if not isinstance(right, ast.Constant):
        return False
    return (isinstance(op, (ast.Gt, ast.NotEq)) and right.value == 0) or (isinstance(op, ast.GtE) and right.value == 1)


def _context_read(node: ast.Call) -> bool:
    return any(isinstance(a, ast.Constant) and a.value == "--max-model-len" for a in node.args) and (
        isinstance(node.func, ast.Attribute) and node.func.attr in ("extra_arg", "value"))


def _engine_setting_read(node: ast.Call) -> bool:
    """An integer read from a group's engine flags (`engine_flags.count`): the engine's settings."""
    return isinstance(node.func, ast.Attribute) and node.func.attr == "count" and \
        isinstance(node.func.value, ast.Name) and node.func.value.id == "engine_flags"


def _attr(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _weights(node: ast.BinOp) -> bool:
    """`m.parameters * m.dtype_bytes`: the model's weight bytes."""
    return isinstance(node.op, ast.Mult) and {_attr(node.left), _attr(node.right)} == {"parameters", "dtype_bytes"}


def _name_parsed(node: ast.Call) -> bool:
    """`pod.rsplit("-", 1)`, `name.rpartition("-")`: a replica's or a node's name taken apart to learn
    its group or its node, which the placement model and the packing hand over as fields."""
    return isinstance(node.func, ast.Attribute) and node.func.attr in ("rsplit", "rpartition") and \
        bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value in ("-", "[")


def _by_ranks(node: ast.BinOp) -> bool:
    """A figure multiplied or divided by tensorParallel: a rank's share, or the ranks' together."""
    return isinstance(node.op, (ast.Mult, ast.Div, ast.FloorDiv)) and \
        any(_attr(side) == "tensor_parallel" for side in (node.left, node.right))


def second_builders(source: str, where: str) -> list[str]:
    """Each line of `source` (the module at `where`, relative to the project) that builds a derived
    fact its owner builds."""
    found = []
    for node in syntax_nodes(source):
        if isinstance(node, ast.JoinedStr) and where != NAMES and _derived_name(node):
            found.append(f"{where}:{node.lineno}: a graph-derived name built outside {NAMES}")
        elif isinstance(node, ast.Compare) and where != PLACEMENT and _active_filter(node):
            found.append(f"{where}:{node.lineno}: the running groups filtered outside {PLACEMENT} "
                         "(placement.running, ResolvedStack.active)")
        elif isinstance(node, ast.Call) and where not in CONTEXT_READERS and _context_read(node):
            found.append(f"{where}:{node.lineno}: a context length read outside {RESOLVED} (ResolvedStack.context)")
        elif isinstance(node, ast.Call) and where != RESOLVED and _engine_setting_read(node):
            found.append(f"{where}:{node.lineno}: an engine setting read from the flags outside {RESOLVED} "
                         "(ResolvedStack.engine, engine_settings)")
        elif isinstance(node, ast.BinOp) and where != RESOLVED and _weights(node):
            found.append(f"{where}:{node.lineno}: the model's weight bytes worked out outside {RESOLVED} "
                         "(weight_bytes, ResolvedStack.weight_bytes)")
        elif isinstance(node, ast.Call) and _name_parsed(node):
            found.append(f"{where}:{node.lineno}: a name taken apart to recover its group or node (read the "
                         "placement model's Replica, the packing's Pod or PendingPod instead)")
        elif isinstance(node, ast.BinOp) and where not in (RESOLVED, PLACEMENT) and _by_ranks(node):
            found.append(f"{where}:{node.lineno}: a figure per rank or over the ranks worked out outside "
                         f"{RESOLVED} (Ranks) or {PLACEMENT} (gpus_per_pod, gpus_needed)")
    return found


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in package.rglob("*.py"))


def test_no_module_builds_a_derived_fact_its_owner_builds():
    found = [line for path in _modules()
             for line in second_builders(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == []


@pytest.mark.parametrize("source", [
    'claim = f"{cfg.graph.name}-model-cache-{cls}"',
    'job = f"{graph}-kv-probe-initiator-{digest}"',
    'svc = f"{name}-frontend"',
    'job = f"{cfg.graph.name}-bench{tail}"',
    'ns = f"dynamo-lab-{stack}"',
    'active = [g for g in cfg.workers if g.replicas > 0]',
    'n = sum(1 for g in groups if g.replicas >= 1)',
    'running = [g for g in workers if g.replicas != 0]',
    'tokens = group.extra_arg("--max-model-len")',
    'tokens = engine_flags.value(group.extra_args, "--max-model-len")',
    'seqs = engine_flags.count(group.extra_args, "--max-num-seqs")',
    'weights = m.parameters * m.dtype_bytes',
    'per_rank = math.ceil(weights / g.tensor_parallel)',
    'blocks = pool_blocks(pool, sizing.kv_bytes_per_token // g.tensor_parallel)',
    'needed = sum(g.replicas * g.tensor_parallel for g in groups)',
    'n = sum(pod.rsplit("-", 1)[0] == group for pod in row.pending)',
    'node = int(host.rpartition("[")[2])',
])
def test_the_check_sees_each_kind_of_second_builder(source):
    assert len(second_builders(source, "dynamo_lab/somewhere.py")) == 1


@pytest.mark.parametrize("source", [
    'name = f"graph-model-cache-volume-{cls}"',  # a Pulumi resource name, not one derived from the graph's
    'label = f"{count} replicas"',
    'idle = [g for g in groups if g.replicas == 0]',
    'flag = group.extra_arg("--enforce-eager")',
    'args += ["--tensor-parallel-size", str(group.tensor_parallel)]',
    'blocks = ranks(cfg, g).pool_blocks(pool)',
])
def test_the_check_leaves_what_derives_nothing(source):
    assert second_builders(source, "dynamo_lab/somewhere.py") == []


def test_the_owners_may_build_their_facts():
    assert second_builders((INFRA / "names.py").read_text(), NAMES) == []
    assert second_builders((INFRA / "resolved.py").read_text(), RESOLVED) == []
    assert second_builders((ROOT / PLACEMENT).read_text(), PLACEMENT) == []
