"""Helpers shared by the tests: a stack file's config (optionally edited), run under mocks or through
the command line in-process, and the pieces of a rendered graph the tests look at."""

from __future__ import annotations

import ast
import copy
import functools
import io
import json
import os
import re
import subprocess
import textwrap
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NoReturn, Optional

import pytest
from hypothesis import settings

from dynamo_lab import cli, mockrun, stack_files
from infra import catalogue
from infra.config import PROJECT
from infra.config.schema import StackConfig
from infra.errors import ConfigError
from infra.plan import Stack, load_stack
from infra.sizing import StackSizing

ROOT = Path(__file__).resolve().parent.parent
# The shipped stacks, by name: a user's own stack file beside them changes no test.
STACKS = list(catalogue.SHIPPED_STACKS)
DGD = "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment"
RELEASE = "kubernetes:helm.sh/v3:Release"
JOB = "kubernetes:batch/v1:Job"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"

def examples(full: int) -> int:
    """A property test's max_examples: `full`, or its share under the fast tier's profile (at least 5).

    dev.py's fast tier loads the hypothesis profile "fast" (tests/conftest.py), whose default count
    says the share; every other run, the slow tier's (which runs the same properties: dev.py
    SLOW_TIER), CI's included, draws each test's full count."""
    default = settings.get_profile("default").max_examples
    return full if settings.default.max_examples == default else max(5, full * settings.default.max_examples // default)


def raw_config(stack: str, edit: Optional[Callable[[dict[str, Any]], None]] = None) -> dict[str, str]:
    """The stack file's config as Pulumi hands it over; `edit` may change the decoded values.

    Keys of the project's namespace appear without their `dynamo-lab:` prefix in `edit`; keys of
    other namespaces (`kubernetes:context`) keep theirs.
    """
    raw, _ = stack_files.stack_config(stack, ROOT)
    if edit is None:
        return raw
    prefix = PROJECT + ":"
    decoded = {k.removeprefix(prefix): json.loads(v) if v[:1] in "[{" else v for k, v in raw.items()}
    edit(decoded)
    raw, _ = stack_files.config_from_doc(decoded)  # encoded again as the Pulumi CLI would
    return raw


def loaded(stack: str, edit=None) -> Stack:
    """The stack file (edited by `edit`), loaded and sized as the program loads it."""
    return load_stack(stack, raw_config(stack, edit))


def sized(stack: str, edit=None) -> tuple[StackConfig, StackSizing]:
    """The stack's validated config (edited by `edit`) and its sizing."""
    s = loaded(stack, edit)
    return s.config, s.sizing


def run_program(stack: str, program: Callable[[], Any]) -> mockrun.Run:
    """`program` (not the project's) under the same mocks, as stack `stack` with no config."""
    return mockrun.run(stack, {}, [], program=program)


def encoded(config: dict[str, Any], stack: Optional[str] = None) -> tuple[dict[str, str], list[str]]:
    """A stack file's `config:` map as the Pulumi CLI hands it to a program, and its secret keys; a
    StackFileError naming Pulumi.<stack>.yaml when no reader would hand it over (an integer past 64 bits)."""
    return stack_files.config_from_doc(config, *([f"Pulumi.{stack}.yaml"] if stack else []))


_RUNS: dict[tuple, mockrun.Run] = {}


def run_stack(stack: str, edit=None, secret_keys=None) -> mockrun.Run:
    """The program's run of the stack file (edited by `edit`) under mocks. Each distinct config runs
    once per test process; every caller gets its own copy, free to change."""
    raw = raw_config(stack, edit)
    key = (stack, json.dumps(raw, sort_keys=True), tuple(secret_keys or ()))
    if key not in _RUNS:
        _RUNS[key] = mockrun.run(stack, raw, list(secret_keys or []))
    return copy.deepcopy(_RUNS[key])


@functools.cache
def syntax_tree(source: str) -> ast.Module:
    """`source` parsed (ast.parse), once per text and process: the structure tests read every module of
    the project (test_structure, test_one_definition, test_plan, test_cli's refusals), each parse
    about 2.5 ms. Shared: read it, do not change it."""
    return ast.parse(source)


@functools.cache
def syntax_nodes(source: str) -> tuple[ast.AST, ...]:
    """Every node of `source`'s syntax tree, in ast.walk's order, walked once per text and process
    (a walk of a module costs about what its parse does). Shared: read them, do not change them."""
    return tuple(ast.walk(syntax_tree(source)))


def run_cli(*args: str, cwd: Path | str = ROOT) -> subprocess.CompletedProcess:
    """The lab's command line in this process (as `dynamo-lab ARGS` in `cwd`): exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = cli.main(list(args))
            except SystemExit as exc:  # argparse's refusals and --help, as the process would exit
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["dynamo-lab", *args], code, out.getvalue(), err.getvalue())


def coarse_predictions(monkeypatch) -> None:
    """`predict`'s cells simulated once each (one graph, one measured run) instead of at its full
    fidelity (cells.SIMULATED_GRAPHS x RUNS_PER_GRAPH): for a test of what the output holds and says,
    whatever the figures; the figures at full fidelity are the slow tier's and the tests that compare them."""
    from dynamo_lab.predict import cells

    def coarse(cfg, sizing, prefix_types, concurrency, lab=cells.LAB, pool_scale=1.0):
        return cells.simulate(cfg, sizing, prefix_types, concurrency, lab, pool_scale, graphs=1, runs=1)[0]

    monkeypatch.setattr(cells, "predict_cell", coarse)


def refused(stack: str, edit=None, secret_keys=()) -> ConfigError:
    """The ConfigError a stack file (edited by `edit`) is refused with; it must register nothing."""
    with pytest.raises(ConfigError) as info:
        mockrun.run(stack, raw_config(stack, edit), list(secret_keys))
    assert info.value.registered == [], "a refused stack registers nothing"
    return info.value


def everything_on(stack: str) -> Callable[[dict[str, Any]], None]:
    """An edit turning on the optional parts a stack allows: the benchmark, and the probe where
    there is a KV transfer to measure."""
    def edit(c: dict[str, Any]) -> None:
        c["benchmark"] = {"enabled": True}
        if stack != "kv-routing":
            c["probe"] = {"enabled": True}
    return edit


def unavailable(reason: str, ci_reason: Optional[str] = None) -> NoReturn:
    """Skip a test whose tool is not installed here; fail it under CI, which installs everything."""
    if os.environ.get("CI"):
        pytest.fail(ci_reason or reason)
    pytest.skip(reason)


def group(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in cfg["workers"] if g["name"] == name)


def components(run: mockrun.Run) -> dict[str, dict[str, Any]]:
    (dgd,) = run.of_type(DGD)
    return {c["name"]: c for c in dgd.inputs["spec"]["components"]}


def main_container(component: dict[str, Any]) -> dict[str, Any]:
    (main,) = [c for c in component["podTemplate"]["spec"]["containers"] if c["name"] == "main"]
    return main


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def wait_for(check: Callable[[], Any], timeout: float = 60.0) -> Any:
    """`check()`'s first truthy answer, asked every half second; AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout} s")


# --- The README's deploy checklist, as data --------------------------------------------------------

CHECKLIST_BEGIN, CHECKLIST_END = "<!-- deploy-checklist -->", "<!-- /deploy-checklist -->"


@dataclass
class ChecklistStep:
    """One numbered step of the README's deploy checklist: its title and its ```sh blocks, as written."""

    number: int
    title: str
    scripts: list[str]

    def commands(self) -> list[str]:
        """The step's command lines in order: `\\` continuations joined, comments and heredoc bodies left out."""
        return [line for script in self.scripts for line in script_commands(script)]


def script_commands(script: str) -> list[str]:
    """A shell block's command lines in order: `\\` continuations joined, comments and heredoc bodies left out."""
    out: list[str] = []
    heredoc, pending = None, ""
    for line in script.splitlines():
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        line = pending + line.strip()
        if line.endswith("\\"):
            pending = line[:-1].rstrip() + " "
            continue
        pending = ""
        if not line or line.startswith("#"):
            continue
        out.append(line)
        marker = re.search(r"<<-?\s*'?(\w+)'?", line)
        if marker:
            heredoc = marker.group(1)
    return out


def pulumi_steps(readme: str) -> list[tuple[int, str]]:
    """The checklist's Pulumi CLI commands in order, each with its step's number (what the cluster
    tier runs as written against the local cluster)."""
    return [(step.number, command) for step in deploy_checklist(readme) for command in step.commands()
            if command.startswith("pulumi ")]


def deploy_checklist(readme: str) -> list[ChecklistStep]:
    """The steps between the README's checklist markers: `N. **Title**` items, each with its ```sh blocks."""
    body = readme[readme.index(CHECKLIST_BEGIN) + len(CHECKLIST_BEGIN):readme.index(CHECKLIST_END)]
    steps: list[ChecklistStep] = []
    block: Optional[list[str]] = None
    for line in body.splitlines():
        item = re.match(r"(\d+)\. \*\*(.+?)\*\*", line)
        if block is None and item:
            steps.append(ChecklistStep(int(item.group(1)), item.group(2), []))
        elif line.strip().startswith("```"):
            if block is None:
                block = []
            else:
                steps[-1].scripts.append(textwrap.dedent("\n".join(block)))
                block = None
        elif block is not None:
            block.append(line)
    return steps


def workflow(name: str) -> dict:
    """A GitHub workflow of the repository (.github/workflows/NAME), parsed (each caller's own copy)."""
    return copy.deepcopy(_parsed_workflow((ROOT / ".github" / "workflows" / name).read_text()))


@functools.cache
def _parsed_workflow(text: str) -> dict:
    # Parsed once per text and process: a dozen tests, some per stack, read the same few files.
    import yaml

    return yaml.safe_load(text)
