"""The architecture, as imports (docs/architecture.md): two packages, the program Pulumi runs (`infra`)
and the toolbox around it (`dynamo_lab`), each in layers that import only the layers below them; no
import cycle, no import of another module's private names; the scripts shipped into the cluster
import nothing of the project.

Every import counts: at the top of a module, inside a function, under `if TYPE_CHECKING:`, and a
constant name given to `importlib.import_module` or `__import__`. A module may import its own layer
and those below; a cycle inside a layer is refused on its own.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

from tests.helpers import ROOT, syntax_tree

PACKAGES = ("infra", "dynamo_lab")

# Bottom to top: each entry is a layer, its modules named by prefix (a package names all of its own).
LAYERS: tuple[tuple[str, ...], ...] = (
    # The program: what `pulumi up` loads.
    ("infra.errors", "infra.units", "infra.names", "infra.catalogue", "infra.prefix_cache", "infra.kv_ranks",
     "infra.payloads"),
    ("infra.config",),  # the schema, single values, engine flags
    ("infra.placement.decide",),  # where pods land: the one decision
    ("infra.placement",),  # where each replica and rank may land
    ("infra.resolved",),  # every fact derived from a stack, once
    ("infra.validate", "infra.sizing"),  # the cross-key checks; what it costs
    ("infra.load",),  # raw config -> the resolved stack, checked
    ("infra.manifests",),  # pure builders
    ("infra.plan",),  # one StackPlan
    ("infra.pulumi_runtime", "infra.components"),  # the Pulumi SDK's edge
    ("infra.program", "infra.__main__", "infra"),
    # The toolbox: imports the program, never the reverse.
    ("dynamo_lab.paths", "dynamo_lab.procs", "dynamo_lab.flags", "dynamo_lab.published", "dynamo_lab.bounded_read",
     "dynamo_lab.upstream"),
    ("dynamo_lab.stack_files",),
    ("dynamo_lab.mockrun", "dynamo_lab.sizing_text"),
    ("dynamo_lab.render", "dynamo_lab.review", "dynamo_lab.config_reference", "dynamo_lab.probe_runner"),
    ("dynamo_lab.preflight",),
    ("dynamo_lab.predict",),
    ("dynamo_lab.advise",),
    ("dynamo_lab.twin", "dynamo_lab.bench"),
    ("dynamo_lab.local_cluster",),  # the local cluster and the real engine
    ("dynamo_lab.docs_samples",),  # runs the commands (cli.main, handed in) whose output the docs show
    ("dynamo_lab.cli", "dynamo_lab.__main__", "dynamo_lab"),
)


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


@cache
def _tree(path: Path) -> ast.Module:
    return syntax_tree(path.read_text())


@cache
def _imports(path: Path, name: str) -> tuple[set[str], set[tuple[str, str]]]:
    """The project's modules `path` (module `name`) imports, and the (module, name) pairs of the
    private names it imports from another module."""
    modules = _modules()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found, private = set(), set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in modules:
                    found.add(full)
                    continue
                found.add(base)
                if alias.name.startswith("_") and not alias.name.startswith("__") and base != name:
                    private.add((base, alias.name))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__")))):
            found.add(node.args[0].value)
    return {m for m in found if m in modules or m.split(".")[0] in PACKAGES} - {name}, private


@cache
def _graph() -> dict[str, set[str]]:
    return {name: _imports(path, name)[0] for name, path in _modules().items()}


def _layer(module: str) -> int:
    """The layer of `module`: the longest prefix that names it."""
    best, where = -1, None
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, where = len(prefix), i
    assert where is not None, f"{module} is in no layer of LAYERS: add it where it belongs"
    return where


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
            elif child not in graph:
                continue
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on:
                low[node] = min(low[node], index[child])
    return out


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_each_layer_imports_only_the_layers_below_it():
    upward = {f"{a} -> {b}" for a, targets in _graph().items() for b in targets if _layer(b) > _layer(a)}
    assert sorted(upward) == []


def test_the_program_never_imports_the_toolbox():
    offenders = {a: sorted(b for b in targets if b.split(".")[0] == "dynamo_lab")
                 for a, targets in _graph().items() if a.split(".")[0] == "infra"}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_module_imports_another_modules_private_names():
    found = {name: sorted(_imports(path, name)[1]) for name, path in _modules().items()}
    assert {k: v for k, v in found.items() if v} == {}


def test_no_program_test_imports_the_toolbox():
    # A program test tests the program; the toolbox's are under tests/lab/.
    offenders = {}
    for path in sorted((ROOT / "tests" / "infra").rglob("*.py")):
        imported = _imports(path, _name(path))[0]
        offenders[str(path.relative_to(ROOT))] = sorted(m for m in imported if m.split(".")[0] == "dynamo_lab")
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize("path", sorted((ROOT / "infra" / "payloads").glob("[!_]*.py"))
                         + [ROOT / "dynamo_lab" / "twin" / "model_dir.py"], ids=lambda p: p.name)
def test_scripts_that_run_elsewhere_import_nothing_of_the_project(path):
    assert not {m for m in _imports(path, _name(path))[0] if m.split(".")[0] in PACKAGES}


def test_every_module_says_what_it_owns():
    missing = [str(p.relative_to(ROOT)) for p in _modules().values() if not ast.get_docstring(_tree(p))]
    assert missing == []


# --- The checks see what they look for ----------------------------------------------------------------


def test_the_checks_see_a_cycle_an_upward_import_and_a_private_name(tmp_path, monkeypatch):
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _layer("infra.config.fields") < _layer("infra.resolved") < _layer("dynamo_lab.cli")
    assert _layer("dynamo_lab.predict.sim") > _layer("dynamo_lab.preflight.packing")
    bad = ROOT / "infra" / "config" / "x.py"  # never written: parsed from text below
    text = ("from infra.resolved import resolve\nfrom dynamo_lab import cli\nfrom ..units import _private\n"
            "if True:\n    import importlib\n    importlib.import_module('dynamo_lab.twin')\n")
    real = _tree
    monkeypatch.setitem(globals(), "_tree", lambda path: ast.parse(text) if path == bad else real(path))
    imported, private = _imports.__wrapped__(bad, "infra.config.x")
    assert {"infra.resolved", "dynamo_lab.cli", "dynamo_lab.twin"} <= imported
    assert private == {("infra.units", "_private")}
    assert [b for b in imported if _layer(b) > _layer("infra.config.x")]
