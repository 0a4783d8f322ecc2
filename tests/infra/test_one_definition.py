"""Each fact a stack derives has one definition: a second builder of any of them fails here.

The names derived from the graph's live in infra/names.py; the groups that run workers, each
group's context length and the cache's locations in infra/resolved.py. A module that builds one of
them again (an f-string `{graph}-model-cache...`, a `replicas > 0` filter, its own reading of
`--max-model-len`) drifts from the one the checks judged; this test reads every module of infra/
and names the line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import ROOT

INFRA = ROOT / "infra"
NAMES, RESOLVED, PLACEMENT = "infra/names.py", "infra/resolved.py", "infra/placement.py"

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


def second_builders(source: str, where: str) -> list[str]:
    """Each line of `source` (the module at `where`, relative to the project) that builds a derived
    fact its owner builds."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr) and where != NAMES and _derived_name(node):
            found.append(f"{where}:{node.lineno}: a graph-derived name built outside {NAMES}")
        elif isinstance(node, ast.Compare) and where != PLACEMENT and _active_filter(node):
            found.append(f"{where}:{node.lineno}: the running groups filtered outside {PLACEMENT} "
                         "(placement.running, ResolvedStack.active)")
        elif isinstance(node, ast.Call) and where not in CONTEXT_READERS and _context_read(node):
            found.append(f"{where}:{node.lineno}: a context length read outside {RESOLVED} (ResolvedStack.context)")
    return found


def _modules() -> list[Path]:
    return sorted(INFRA.rglob("*.py"))


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
])
def test_the_check_sees_each_kind_of_second_builder(source):
    assert len(second_builders(source, "dynamo_lab/somewhere.py")) == 1


@pytest.mark.parametrize("source", [
    'name = f"graph-model-cache-volume-{cls}"',  # a Pulumi resource name, not one derived from the graph's
    'label = f"{count} replicas"',
    'idle = [g for g in groups if g.replicas == 0]',
    'flag = group.extra_arg("--enforce-eager")',
])
def test_the_check_leaves_what_derives_nothing(source):
    assert second_builders(source, "dynamo_lab/somewhere.py") == []


def test_the_owners_may_build_their_facts():
    assert second_builders((INFRA / "names.py").read_text(), NAMES) == []
    assert second_builders((INFRA / "resolved.py").read_text(), RESOLVED) == []
