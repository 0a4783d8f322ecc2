"""The plan is the one place that decides what a stack deploys: the program registers exactly the
plan's objects, and no other code calls the builders of a stack's objects or makes a resource."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional

import pytest

from infra.plan import load_stack, plan
from tests.helpers import ROOT, everything_on, loaded, raw_config, run_stack, syntax_nodes

# The builders that make a stack's objects: only the plan reaches them (their own modules aside).
STACK_BUILDERS = {
    ("graph", "deployment"), ("graph", "network_policies"), ("model_cache", "claim"), ("model_pull", "jobs"),
    ("transfer_probe", "manifests"), ("benchmark", "manifests"), ("platform", "release"),
}
BUILDERS = {f"infra.manifests.{m}.{f}" for m, f in STACK_BUILDERS}
# Where Pulumi resources are made: the plan's objects (components) and the cluster provider (program).
RESOURCE_MODULES = {"infra/components/__init__.py", "infra/program.py"}

VARIANTS = {
    "shipped": None,
    "everything on": "all",
    "pvc cache, network policies, token": {"modelCache": {"mode": "pvc"}, "graph": {"networkPolicy": True}},
    "existing claim, no platform": {"modelCache": {"mode": "pvc", "pvc": {"claimName": "models"}},
                                    "platform": {"manage": False}},
    "no cache": {"modelCache": {"mode": "off"}},
}


def _edit(stack: str, variant):
    if variant is None:
        return None
    if variant == "all":
        return everything_on(stack)
    return lambda c: c.update(variant)


def _sources() -> list[Path]:
    return [p for p in (ROOT / "infra").rglob("*.py") if "__pycache__" not in p.parts]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _package(path: Path) -> str:
    """The package a module's relative imports resolve against (an __init__.py is its own package)."""
    return ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])


def _dotted(node: ast.expr) -> Optional[tuple[str, list[str]]]:
    """`a.b.c` as ("a", ["b", "c"]); None for anything that is not a name and attributes."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.insert(0, node.attr)
        node = node.value
    return (node.id, attrs) if isinstance(node, ast.Name) else None


def builder_references(source: str, package: str) -> list[tuple[int, str]]:
    """Every place `source` (a module of `package`) reaches a builder of BUILDERS: (line, builder).

    Called or not (a builder passed as a value counts), through any name an import binds (`import
    infra.manifests.graph [as g]`, `from infra.manifests[.graph] import ... [as ...]`, `from infra
    import manifests`, relative imports), an attribute chain on it, a name assigned from one of those
    (`g = graph`), `getattr(module, "builder")`, or a star import of a builder's module. Scopes are not
    told apart: a name bound to a builder's module anywhere in the file counts everywhere in it.
    """
    nodes = syntax_nodes(source)
    bound: dict[str, str] = {}  # local name -> the dotted name it stands for
    found: list[tuple[int, str]] = []

    def absolute(module: Optional[str], level: int) -> str:
        if not level:
            return module or ""
        parts = package.split(".")
        return ".".join(parts[: len(parts) - level + 1] + ([module] if module else []))

    def resolve(node: ast.expr) -> Optional[str]:
        chain = _dotted(node)
        if chain is None or chain[0] not in bound:
            return None
        return ".".join([bound[chain[0]], *chain[1]])

    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    bound[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    bound[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node.module, node.level)
            for a in node.names:
                if a.name == "*":
                    found += [(node.lineno, b) for b in sorted(BUILDERS) if b.rsplit(".", 1)[0] == base]
                else:
                    bound[a.asname or a.name] = f"{base}.{a.name}"
                    if f"{base}.{a.name}" in BUILDERS:
                        found.append((node.lineno, f"{base}.{a.name}"))
    # Names assigned from a bound name (`g = graph`, `build = graph.deployment`), until none is added.
    while True:
        more = {t.id: target for node in nodes if isinstance(node, (ast.Assign, ast.AnnAssign))
                and node.value is not None and (target := resolve(node.value)) is not None
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(t, ast.Name) and bound.get(t.id) != target}
        if not more:
            break
        bound.update(more)
    for node in nodes:
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            target = resolve(node)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and (module := resolve(node.args[0])) is not None):
            target = f"{module}.{node.args[1].value}"
        else:
            continue
        if target in BUILDERS:
            found.append((node.lineno, target))
    return found


def test_only_the_plan_reaches_the_builders_of_a_stacks_objects():
    reached = {}
    for path in _sources():
        for line, builder in builder_references(path.read_text(), _package(path)):
            reached.setdefault(builder, []).append(f"{_rel(path)}:{line}")
    own = {b: f"infra/manifests/{b.split('.')[2]}.py" for b in BUILDERS}
    outside = {b: [w for w in where if not w.startswith(("infra/plan.py:", own[b] + ":"))]
               for b, where in reached.items()}
    assert {b: w for b, w in outside.items() if w} == {}, "a stack's objects are built outside infra/plan.py"
    in_plan = {b for b, where in reached.items() if any(w.startswith("infra/plan.py:") for w in where)}
    assert in_plan == BUILDERS, "the plan builds every one"


# Each way of reaching a builder, in a module outside the plan: the text on the line, the builder.
SOMEWHERE_ELSE = """
import infra.manifests.graph
import infra.manifests.model_cache as cache
from infra import manifests
from infra.manifests import platform as helm, benchmark
from infra.manifests.model_pull import jobs
from infra.manifests.transfer_probe import manifests as probe_objects

def f(cfg, sizing):
    infra.manifests.graph.deployment(cfg, sizing)
    cache.claim(cfg)
    helm.release(cfg.platform)
    make = benchmark.manifests
    g = manifests.graph
    policies = map(g.network_policies, [cfg])
    return jobs(cfg), probe_objects, make, policies
"""
WAYS = {
    "infra.manifests.graph.deployment(cfg, sizing)": "graph.deployment",  # the whole chain
    "cache.claim(cfg)": "model_cache.claim",  # a module's alias
    "helm.release(cfg.platform)": "platform.release",  # a module from-imported under an alias
    "make = benchmark.manifests": "benchmark.manifests",  # held as a value, not called
    "map(g.network_policies, [cfg])": "graph.network_policies",  # through a name assigned a module
    "from infra.manifests.model_pull import jobs": "model_pull.jobs",  # a builder from-imported
    "return jobs(cfg), probe_objects": "model_pull.jobs",  # ... and called by its name
    "manifests as probe_objects": "transfer_probe.manifests",  # ... under an alias
}
# A relative import in a module of infra.manifests, getattr, a star import.
IN_MANIFESTS = """
from . import graph as g
from .model_pull import *

def f(cfg):
    return getattr(g, "deployment")(cfg), g.frontend_url(cfg)
"""


def _on(source: str, text: str) -> int:
    (line,) = [n for n, t in enumerate(source.splitlines(), 1) if text in t]
    return line


def test_the_builder_check_sees_every_way_of_reaching_a_builder():
    found = set(builder_references(SOMEWHERE_ELSE, "dynamo_lab"))
    for text, builder in WAYS.items():
        assert (_on(SOMEWHERE_ELSE, text), f"infra.manifests.{builder}") in found, text
    assert {b for _, b in found} == BUILDERS
    assert sorted(builder_references(IN_MANIFESTS, "infra.manifests")) == [
        (_on(IN_MANIFESTS, "import *"), "infra.manifests.model_pull.jobs"),
        (_on(IN_MANIFESTS, "getattr"), "infra.manifests.graph.deployment")]


def test_the_builder_check_passes_what_is_not_a_builder():
    source = "from infra.manifests import graph, security\ngraph.frontend_url(cfg)\nsecurity.claim(cfg)\n"
    assert builder_references(source, "infra") == []


def test_only_the_components_and_the_provider_import_the_kubernetes_sdk():
    importers = set()
    for path in _sources():
        for node in syntax_nodes(path.read_text()):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "pulumi_kubernetes" for n in names):
                importers.add(_rel(path))
    assert importers == RESOURCE_MODULES


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_program_registers_exactly_the_plans_objects_in_their_components(stack, variant):
    edit = _edit(stack, VARIANTS[variant])
    planned = plan(loaded(stack, edit))
    run = run_stack(stack, edit)
    by_urn = {r.urn: r for r in run.resources}
    registered = {r.name: r for r in run.resources if r.custom and r.type != "pulumi:providers:kubernetes"}
    assert sorted(registered) == sorted(o.name for o in planned.objects)
    components = {c.name: c for c in planned.components}
    for o in planned.objects:
        r = registered[o.name]
        assert by_urn[r.parent].name == o.component
        assert by_urn[r.parent].type == components[o.component].type
        assert {by_urn[d].name for d in r.dependencies} == set(o.after), o.name
    assert run.outputs.keys() == planned.outputs.keys()


def test_each_planned_object_comes_after_what_it_waits_for(stack):
    planned = plan(loaded(stack, everything_on(stack)))
    seen: set[str] = set()
    for o in planned.objects:
        assert set(o.after) <= seen, o.name
        seen.add(o.name)
    # The graph waits for the operator and for the model in every cache.
    assert {"platform-release", "graph-ns"} <= set(planned.named("graph-dgd").after)
    assert {o.name for o in planned.of_kind("Job") if o.component == "graph-model-cache"} <= \
        set(planned.named("graph-dgd").after)


def test_the_plan_holds_no_secret_value():
    raw = raw_config("cross-server", lambda c: c.update(hfToken="hf_not_in_any_plan"))
    planned = plan(load_stack("cross-server", raw, secret_keys=["dynamo-lab:hfToken"]))
    assert "hf_not_in_any_plan" not in repr(planned.objects)
    (secret,) = planned.of_kind("Secret")
    assert secret.manifest["stringData"] == {"HF_TOKEN": None}
