"""The architecture, as imports: the lab tools import the deployed program, never the reverse, and
the scripts shipped into the cluster import nothing of the project."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import ROOT

INFRA = ROOT / "infra"
ENTRY = INFRA / "__main__.py"


def _imports(path: Path) -> set[str]:
    """Every module a file imports, absolute or relative (resolved against its package), and every
    module named by a constant in `importlib.import_module(...)` or `__import__(...)`."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1]) if path.is_relative_to(ROOT) else ""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            out.update([base] + [f"{base}.{a.name}" for a in node.names])
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__")))):
            out.add(node.args[0].value)
    return out


def _program_modules() -> list[Path]:
    return sorted(p for p in INFRA.rglob("*.py") if "lab" not in p.relative_to(INFRA).parts)


def test_the_program_never_imports_the_lab():
    offenders = {str(p.relative_to(ROOT)): sorted(i for i in _imports(p) if i.startswith("infra.lab"))
                 for p in _program_modules()}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_program_test_imports_the_lab():
    # A program test tests the program: the lab's tools are tested under tests/lab/. (This file and
    # test_entry.py name infra.lab only to check that the program does not import it.)
    tests = sorted(p for p in (ROOT / "tests" / "infra").rglob("*.py")
                   if p.name not in ("test_import_direction.py", "test_entry.py"))
    offenders = {str(p.relative_to(ROOT)): sorted(i for i in _imports(p) if i.startswith("infra.lab"))
                 for p in tests}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from infra.lab import render\nimport infra.lab.cli\nimportlib.import_module('infra.lab.twin')\n"
                   "__import__('infra.lab.bench')\n")
    assert {"infra.lab", "infra.lab.render", "infra.lab.cli", "infra.lab.twin", "infra.lab.bench"} <= _imports(bad)


@pytest.mark.parametrize("path", sorted((INFRA / "payloads").glob("[!_]*.py")) + [INFRA / "lab/twin/model_dir.py"],
                         ids=lambda p: p.name)
def test_scripts_that_run_elsewhere_import_nothing_of_the_project(path):
    assert not any(i == "infra" or i.startswith("infra.") for i in _imports(path))


def test_every_module_says_what_it_owns():
    missing = [str(p.relative_to(ROOT)) for p in INFRA.rglob("*.py") if not ast.get_docstring(ast.parse(p.read_text()))]
    assert missing == []
