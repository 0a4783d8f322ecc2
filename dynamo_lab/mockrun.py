"""Run the real program in-process under Pulumi mocks: no cluster, no Pulumi CLI.

Used by `render`, `diff` and the tests. Takes a stack's config as the Pulumi CLI hands it to a
program (read by dynamo_lab/stack_files.py), runs `infra.program.build` through
`infra.pulumi_runtime`, and returns every registration in order (type token, logical name,
inputs, parent, dependencies, provider).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from dynamo_lab.stack_files import stack_config
from infra.config import PROJECT

# Pulumi (and gRPC) are slow to import: only run() needs them, not the tools that only read stack files
# (sizing, probe, preflight, predict).
if TYPE_CHECKING:
    from infra.pulumi_runtime import Registration

@dataclass
class Run:
    stack: str
    resources: list[Registration] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)

    def of_type(self, token: str) -> list[Registration]:
        return [r for r in self.resources if r.type == token]


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
