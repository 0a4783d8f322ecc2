"""The lab's reader of the project's files: where the project is, its stacks, each stack file read
within bounds and handed over as the Pulumi CLI hands config to a program, and loaded.

Every lab tool reads stack files through here (render, diff, sizing, probe, preflight, predict,
advise, the local cluster's commands); the deployed program gets its config from the Pulumi CLI
instead (infra/pulumi_runtime.py). Running the program under mocks is dynamo_lab/mockrun.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from dynamo_lab import bounded_read
from dynamo_lab.paths import ROOT
from infra.config import PROJECT
from infra.errors import UserError

if TYPE_CHECKING:  # the plan imports the sizing; the tools that only read files need neither
    from infra.plan import Stack

SECRET_PLACEHOLDER = "[secret]"


class StackFileError(UserError):
    pass


# --- The one reader of the project's YAML files ---------------------------------------------------
# The bounds (a few kilobytes, a few levels, a few hundred values: a stack file) and why they are
# those are bounded_read.py's, shared with the local cluster's commands and the Pulumi driver, which
# cannot import this module; here its refusals become StackFileError, worded as they are there.
MAX_YAML_BYTES = bounded_read.MAX_YAML_BYTES
MAX_YAML_DEPTH = bounded_read.MAX_YAML_DEPTH
MAX_YAML_VALUES = bounded_read.MAX_YAML_VALUES


def parse_yaml(text: str, name: str) -> Any:
    """One YAML document from `text` (of the file `name`), with the reader's bounds; a StackFileError of
    one line naming the file, where and why, when it is not one."""
    try:
        return bounded_read.parse_yaml(text, name)
    except bounded_read.Unreadable as exc:
        raise StackFileError(str(exc)) from None


def read_yaml(path: Path, name: Optional[str] = None, limit: int = MAX_YAML_BYTES) -> Any:
    """The YAML document of the file `path` (named `name` in errors, default its file name): at most
    `limit` bytes, strict UTF-8, then parse_yaml. Every stack file, Pulumi.yaml and kubeconfig the
    tools read comes through here."""
    try:
        return bounded_read.read_yaml(path, name, limit)
    except bounded_read.Unreadable as exc:
        raise StackFileError(str(exc)) from None


def _is_project(directory: Path) -> bool:
    project = directory / "Pulumi.yaml"
    if not project.is_file():
        return False
    doc = read_yaml(project, str(project))
    return isinstance(doc, dict) and doc.get("name") == PROJECT


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


def stack_file(stack: str, root: Path) -> Path:
    """Pulumi.<stack>.yaml in `root`, or the one refusal every command words the same way."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        # Pulumi names a stack's file with its project file's extension (sdk/go/common/workspace/paths.go,
        # ProjectStackPath, v3.274.1): beside Pulumi.yaml a Pulumi.<stack>.yml is never read.
        yml = root / f"Pulumi.{stack}.yml"
        hint = (f" ({yml.name} is here, but beside Pulumi.yaml Pulumi reads a stack's file only as "
                f"Pulumi.<stack>.yaml: rename it to {path.name})") if yml.is_file() else ""
        raise StackFileError(f"no stack file {path.name} in {root}{hint}; stacks here: {', '.join(stacks_in(root))}")
    return path


def stack_doc(stack: str, root: Optional[Path] = None) -> dict[str, Any]:
    """Pulumi.<stack>.yaml's `config:` map, as written (a StackFileError when it is not one)."""
    root = root or project_root()
    path = stack_file(stack, root)
    doc = read_yaml(path) or {}
    if not isinstance(doc, dict) or not isinstance(doc.get("config") or {}, dict):
        raise StackFileError(f"{path.name}: `config` must be a map of keys to values, as Pulumi writes it")
    # A namespaced key outside `config:` (written at column 0): the Pulumi CLI reads a stack file's
    # settings from `config:` alone and drops other top-level keys without a word (ProjectStack in
    # pulumi/pulumi sdk/go/common/workspace/project.go v3.274.1 has no field for them), so the stack
    # would run on the defaults of what the user meant to set.
    stray = [str(k) for k in doc if isinstance(k, str) and ":" in k]
    if stray:
        raise StackFileError(
            f"{path.name}: {', '.join(f'`{k}`' for k in stray)} {'is' if len(stray) == 1 else 'are'} at the "
            "top level, outside `config:`, where Pulumi ignores a setting (the stack would run on its "
            "defaults). Indent it under `config:`, level with the keys there")
    return doc.get("config") or {}


def stack_config(stack: str, root: Optional[Path] = None) -> tuple[dict[str, str], list[str]]:
    """Read Pulumi.<stack>.yaml the way the Pulumi CLI hands config to a program.

    Structured values become JSON text, scalars text; `secure:` values cannot be decrypted here and
    are passed as a placeholder marked secret (render never needs the real value).
    """
    return config_from_doc(stack_doc(stack, root), f"Pulumi.{stack}.yaml")


def load(stack: str, root: Optional[Path] = None) -> "Stack":
    """Read, validate and size Pulumi.<stack>.yaml: the Stack the program would plan."""
    from infra.plan import load_stack

    raw, secrets = stack_config(stack, root)
    return load_stack(stack, raw, secrets)


def config_from_doc(config: dict[str, Any], name: str = "the stack file") -> tuple[dict[str, str], list[str]]:
    """A stack file's `config:` map as the Pulumi CLI hands it to a program, and its secret keys. An
    integer beyond the 64 bits Pulumi's reader holds one in is refused (StackFileError naming `name`
    and the key): read_yaml refuses one in a file, and a map made in code (advise's, a test's) gets
    the same line, where writing it out as text would raise a ValueError past 4,300 digits."""
    raw: dict[str, str] = {}
    secrets: list[str] = []
    for key, value in config.items():
        key = str(key)
        key = key if ":" in key else f"{PROJECT}:{key}"
        _refuse_huge_ints(value, key, name)
        if isinstance(value, dict) and set(value) == {"secure"}:
            raw[key] = SECRET_PLACEHOLDER
            secrets.append(key)
        elif isinstance(value, (dict, list)):
            raw[key] = json.dumps(value, default=str)  # YAML dates and the like, as text
        elif isinstance(value, bool):
            raw[key] = "true" if value else "false"
        elif value is None:
            # A key with no value (`kubernetes:context:`, or `dynamo-lab:model:` whose keys were not
            # indented under it) the Pulumi CLI hands over as "", with a warning (pulumi/pulumi
            # sdk/go/common/workspace/loaders.go, checkForEmptyConfig); str() would make it 'None'.
            raw[key] = ""
        else:
            raw[key] = str(value)
    return raw, secrets


def _refuse_huge_ints(value: Any, path: str, name: str) -> None:
    """StackFileError for the first integer in `value` beyond 64 bits (bounded_read.int_out_of_range)."""
    todo = [(value, path)]
    while todo:
        node, where = todo.pop()
        if isinstance(node, dict):
            todo.extend((v, f"{where}.{k}") for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            todo.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(node))))
        elif isinstance(node, int) and (why := bounded_read.int_out_of_range(node)):
            raise StackFileError(f"{name}: `{where}` {why}")
