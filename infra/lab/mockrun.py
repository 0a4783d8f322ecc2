"""Run the real program in-process under Pulumi mocks: no cluster, no Pulumi CLI.

Used by `render`, `diff` and the tests. Reads a stack file the way the Pulumi CLI hands config to
a program, runs `infra.program.build` through `infra.pulumi_runtime`, and returns every
registration in order (type token, logical name, inputs, parent, dependencies, provider).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import yaml

from infra.config import PROJECT
from infra.errors import UserError

# Pulumi (and gRPC) are slow to import: only run() needs them, not the tools that only read stack files
# (sizing, probe, preflight, predict).
if TYPE_CHECKING:
    from infra.plan import Stack
    from infra.pulumi_runtime import Registration

ROOT = Path(__file__).resolve().parents[2]
SECRET_PLACEHOLDER = "[secret]"


@dataclass
class Run:
    stack: str
    resources: list[Registration] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)

    def of_type(self, token: str) -> list[Registration]:
        return [r for r in self.resources if r.type == token]


class StackFileError(UserError):
    pass


def _is_project(directory: Path) -> bool:
    project = directory / "Pulumi.yaml"
    return project.is_file() and (yaml.safe_load(project.read_text()) or {}).get("name") == PROJECT


def project_root() -> Path:
    """The dynamo-lab project the user is in (like the Pulumi CLI: nearest Pulumi.yaml up from the
    working directory), else the checkout this code runs from; an installed copy (site-packages)
    has no project beside it, so outside a project that is an error."""
    here = Path.cwd()
    for d in (here, *here.parents):
        if _is_project(d):
            return d
    if _is_project(ROOT):
        return ROOT
    raise StackFileError(f"no Pulumi.yaml of {PROJECT} in {here} or any directory above it: run dynamo-lab "
                         f"in the project's checkout (the directory with Pulumi.yaml and the Pulumi.<stack>.yaml "
                         "stack files), or below it")


def stacks_in(root: Path) -> list[str]:
    """The stacks of a project: STACK for every Pulumi.STACK.yaml."""
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def stack_doc(stack: str, root: Optional[Path] = None) -> dict[str, Any]:
    """Pulumi.<stack>.yaml's `config:` map, as written (a StackFileError when it is not one)."""
    root = root or project_root()
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise StackFileError(f"no stack file {path.name} in {root}; stacks here: {', '.join(stacks_in(root))}")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise StackFileError(f"{path.name} is not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config") or {}, dict):
        raise StackFileError(f"{path.name}: `config` must be a map of keys to values, as Pulumi writes it")
    return doc.get("config") or {}


def stack_config(stack: str, root: Optional[Path] = None) -> tuple[dict[str, str], list[str]]:
    """Read Pulumi.<stack>.yaml the way the Pulumi CLI hands config to a program.

    Structured values become JSON text, scalars text; `secure:` values cannot be decrypted here and
    are passed as a placeholder marked secret (render never needs the real value).
    """
    return config_from_doc(stack_doc(stack, root))


def load(stack: str, root: Optional[Path] = None) -> "Stack":
    """Read, validate and size Pulumi.<stack>.yaml: the Stack the program would plan."""
    from infra.plan import load_stack

    raw, secrets = stack_config(stack, root)
    return load_stack(stack, raw, secrets)


def config_from_doc(config: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """A stack file's `config:` map as the Pulumi CLI hands it to a program, and its secret keys."""
    raw: dict[str, str] = {}
    secrets: list[str] = []
    for key, value in config.items():
        key = str(key)
        key = key if ":" in key else f"{PROJECT}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            raw[key] = SECRET_PLACEHOLDER
            secrets.append(key)
        elif isinstance(value, (dict, list)):
            raw[key] = json.dumps(value, default=str)  # YAML dates and the like, as text
        elif isinstance(value, bool):
            raw[key] = "true" if value else "false"
        else:
            raw[key] = str(value)
    return raw, secrets


def run(stack: str, raw_config: Optional[dict[str, str]] = None, secret_keys: Optional[list[str]] = None,
        program: Optional[Callable[[], dict[str, Any]]] = None, root: Optional[Path] = None) -> Run:
    """Run `program` (default: infra.program.build) for `stack` under mocks.

    A program that raises gets the registrations made so far attached as `exc.registered`, so a
    caller can check that a rejected stack file registered nothing.
    """
    if raw_config is None:
        raw_config, secret_keys = stack_config(stack, root)
    from infra import pulumi_runtime

    if program is None:
        from infra.program import build as program
    record: list[Registration] = []
    try:
        outputs = pulumi_runtime.run_with_mocks(program, project=PROJECT, stack=stack, config=raw_config,
                                                secret_keys=list(secret_keys or []), record=record)
    except Exception as exc:
        exc.registered = list(record)  # type: ignore[attr-defined]
        raise
    return Run(stack=stack, resources=record, outputs=outputs)
