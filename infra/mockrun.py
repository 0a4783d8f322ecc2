"""Run the real program in-process under Pulumi mocks: no cluster, no Pulumi CLI.

Used by `render`, `diff` and the tests. Records every registration in order with its type token,
logical name, inputs, parent and dependencies (the mock monitor's own view of the program).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import pulumi
import yaml
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.stack import wait_for_rpcs

from infra.config import PROJECT

ROOT = Path(__file__).resolve().parent.parent
SECRET_PLACEHOLDER = "[secret]"


@dataclass
class Registered:
    type: str
    name: str
    inputs: dict[str, Any]
    urn: str
    parent: str
    dependencies: list[str]
    custom: bool


@dataclass
class Run:
    stack: str
    resources: list[Registered] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)

    def of_type(self, token: str) -> list[Registered]:
        return [r for r in self.resources if r.type == token]

    def by_urn(self, urn: str) -> Registered:
        return next(r for r in self.resources if r.urn == urn)


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class _RecordingMonitor(MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.registered: list[Registered] = []

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            state = self.resources[response.urn].state if response.urn in self.resources else {}
            self.registered.append(Registered(
                type=request.type, name=request.name, inputs=state, urn=response.urn,
                parent=request.parent, dependencies=list(request.dependencies), custom=request.custom))
        return response


def project_root() -> Path:
    """The dynamo-lab project the user is in (like the Pulumi CLI: nearest Pulumi.yaml up from the
    working directory), else the one this code belongs to."""
    for d in (Path.cwd(), *Path.cwd().parents):
        project = d / "Pulumi.yaml"
        if project.is_file() and (yaml.safe_load(project.read_text()) or {}).get("name") == PROJECT:
            return d
    return ROOT


def stacks_in(root: Path) -> list[str]:
    """The stacks of a project: STACK for every Pulumi.STACK.yaml."""
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def stack_config(stack: str, root: Optional[Path] = None) -> tuple[dict[str, str], list[str]]:
    """Read Pulumi.<stack>.yaml the way the Pulumi CLI hands config to a program.

    Structured values become JSON text, scalars text; `secure:` values cannot be decrypted here and
    are passed as a placeholder marked secret (render never needs the real value).
    """
    root = root or project_root()
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no stack file {path.name} in {root}; stacks here: {', '.join(stacks_in(root))}")
    doc = yaml.safe_load(path.read_text()) or {}
    raw: dict[str, str] = {}
    secrets: list[str] = []
    for key, value in (doc.get("config") or {}).items():
        key = key if ":" in key else f"{PROJECT}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            raw[key] = SECRET_PLACEHOLDER
            secrets.append(key)
        elif isinstance(value, (dict, list)):
            raw[key] = json.dumps(value)
        elif isinstance(value, bool):
            raw[key] = "true" if value else "false"
        else:
            raw[key] = str(value)
    return raw, secrets


@contextlib.contextmanager
def _clean_kube_env():
    # pulumi_kubernetes reads KUBECONFIG / PULUMI_K8S_* when a provider is built (FIELD-NOTES);
    # an offline render must not depend on whatever cluster this shell points at.
    saved = {k: os.environ.pop(k) for k in list(os.environ)
             if k == "KUBECONFIG" or k.startswith("PULUMI_K8S_") or k == "PULUMI_CONFIG"}
    try:
        yield
    finally:
        os.environ.update(saved)


async def _resolve(value: Any) -> Any:
    if isinstance(value, pulumi.Output):
        return await _resolve(await value.future())
    if isinstance(value, dict):
        return {k: await _resolve(v) for k, v in value.items()}
    if isinstance(value, list):
        return [await _resolve(v) for v in value]
    return value


def run(stack: str, raw_config: Optional[dict[str, str]] = None, secret_keys: Optional[list[str]] = None,
        program: Optional[Callable[[], dict[str, Any]]] = None, root: Optional[Path] = None) -> Run:
    """Run `program` (default: infra.program.build) for `stack` under mocks on a fresh event loop."""
    if raw_config is None:
        raw_config, secret_keys = stack_config(stack, root)
    if program is None:
        from infra.program import build as program
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks = _Mocks()
    monitor = _RecordingMonitor(mocks)
    try:
        with _clean_kube_env():
            # A fresh root Stack per run: earlier runs in this process must not leak resources.
            pulumi.runtime.settings.reset_options()
            pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
            pulumi.runtime.set_all_config(dict(raw_config), list(secret_keys or []))
            try:
                outputs = program()
            except Exception as exc:
                # Lets callers (and tests) check that a rejected config registered nothing.
                exc.registered = list(monitor.registered)  # type: ignore[attr-defined]
                raise
            resolved = loop.run_until_complete(_resolve(outputs))
            loop.run_until_complete(wait_for_rpcs())
        return Run(stack=stack, resources=list(monitor.registered), outputs=resolved)
    finally:
        # A rejected config leaves the root Stack's registration pending: cancel it cleanly.
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        asyncio.set_event_loop(None)
        loop.close()
