"""The lab's reader of the project's files: where the project is, its stacks, each stack file read
within bounds and handed over as the Pulumi CLI hands config to a program, and loaded.

Every lab tool reads stack files through here (render, diff, sizing, probe, preflight, predict,
advise, the local cluster's commands); the deployed program gets its config from the Pulumi CLI
instead (infra/pulumi_runtime.py). Running the program under mocks is infra/lab/mockrun.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import yaml

from infra.config import PROJECT
from infra.errors import UserError
from infra.lab.paths import ROOT

if TYPE_CHECKING:  # the plan imports the sizing; the tools that only read files need neither
    from infra.plan import Stack

SECRET_PLACEHOLDER = "[secret]"


class StackFileError(UserError):
    pass


# --- The one reader of the project's YAML files ---------------------------------------------------
# A stack file is a few kilobytes (the lab's are under 1 KiB, one advise writes about 3 KiB), a few
# levels deep, and a few hundred values. Anything far past that is not a stack file, and without
# bounds it costs a traceback or minutes: PyYAML's composer recurses once per nesting level
# (RecursionError near 1,000), and an alias names a value already built, so seven levels of nine
# aliases each over nine strings (a "billion laughs" file of 600 bytes) expand to 43 million values
# when constructed. The bounds are checked on the composed node graph, in which an alias is the node
# it names, not a copy: counting what it would expand to is linear in the file, and nothing is
# constructed before. Pulumi's own reader bounds alias expansion too (gopkg.in/yaml.v3 decode.go,
# by the ratio of values decoded to values parsed).
MAX_YAML_BYTES = 256 * 1024
MAX_YAML_DEPTH = 64
MAX_YAML_VALUES = 5_000


class _Refused(Exception):
    """A bound of the reader crossed while composing: why, at which mark."""

    def __init__(self, why: str, mark: Any):
        super().__init__(why)
        self.why, self.mark = why, mark


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose scanner and composer stop at MAX_YAML_DEPTH levels, before Python's recursion
    limit, and at MAX_YAML_VALUES values written (PyYAML in Python composes some 20,000 a second,
    10,000 on a busy machine)."""

    def __init__(self, stream: str, name: str):
        super().__init__(stream)
        self.name = name  # the marks of its errors name the file, not "<unicode string>"
        self.depth = self.values = 0

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        # Each `[` or `{` may begin a key, so PyYAML's scanner reads up to 1,024 characters ahead
        # before it hands the composer a token, checking every open one at each step: 5,000 `[`
        # cost a second that way. Stopped here, the scanner never holds more than MAX_YAML_DEPTH.
        if self.flow_level >= MAX_YAML_DEPTH:
            raise _Refused(f"nested more than {MAX_YAML_DEPTH} levels deep", self.get_mark())
        super().fetch_flow_collection_start(token_class)

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        self.values += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                raise _Refused(f"nested more than {MAX_YAML_DEPTH} levels deep", self.peek_event().start_mark)
            if self.values > MAX_YAML_VALUES:
                raise _Refused(f"more than {MAX_YAML_VALUES:,} values, where a stack file has a few hundred",
                               self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _expanded(root: yaml.Node) -> None:
    """Refuse a node graph whose aliases expand past MAX_YAML_VALUES values or MAX_YAML_DEPTH levels,
    or name a value they are inside (one without end): each node's expanded size and depth once,
    bottom up, without recursion (an alias chain can be deeper than the text)."""
    done: dict[int, tuple[int, int]] = {}  # id(node) -> (values, depth) it expands to
    open_: set[int] = set()  # the nodes whose children are being counted: the path from the root
    todo: list[tuple[yaml.Node, bool]] = [(root, False)]
    while todo:
        node, counted = todo.pop()
        key = id(node)
        if counted:
            open_.discard(key)
            kids = [done[id(k)] for k in _children(node)]
            values, depth = 1 + sum(v for v, _ in kids), 1 + max((d for _, d in kids), default=0)
            if values > MAX_YAML_VALUES:
                raise _Refused(f"its aliases (*name) expand to more than {MAX_YAML_VALUES:,} values, where a stack "
                               "file has a few hundred", node.start_mark)
            if depth > MAX_YAML_DEPTH:
                raise _Refused(f"its aliases (*name) nest it more than {MAX_YAML_DEPTH} levels deep",
                               node.start_mark)
            done[key] = (values, depth)
        elif key in open_:
            raise _Refused("an alias (*name) inside the value it names, which would never end", node.start_mark)
        elif key not in done:
            open_.add(key)
            todo.append((node, True))
            todo.extend((k, False) for k in _children(node) if id(k) not in done)


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "its start"


def parse_yaml(text: str, name: str) -> Any:
    """One YAML document from `text` (of the file `name`), with the reader's bounds; a StackFileError of
    one line naming the file, where and why, when it is not one."""
    try:
        loader = _BoundedLoader(text, name)
    except yaml.reader.ReaderError as exc:  # a control character, refused before anything is parsed
        line = text.count("\n", 0, exc.position) + 1
        raise StackFileError(f"{name}: not YAML text: character U+{exc.character:04X} at line {line} is one YAML "
                             "does not allow (a control character); is it the right file?") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded(node)
        return loader.construct_document(node)
    except _Refused as exc:
        raise StackFileError(f"{name}: refused at {_where(exc.mark)}: {exc.why}; is it the right file?") from None
    except yaml.MarkedYAMLError as exc:
        problem = " ".join(f"{exc.problem or exc.context or 'not valid YAML'}".split())
        raise StackFileError(f"{name}: not valid YAML at {_where(exc.problem_mark or exc.context_mark)}: "
                             f"{problem}") from None
    except yaml.YAMLError as exc:
        raise StackFileError(f"{name}: not valid YAML: {' '.join(str(exc).split())}") from None
    finally:
        loader.dispose()


def read_yaml(path: Path, name: Optional[str] = None, limit: int = MAX_YAML_BYTES) -> Any:
    """The YAML document of the file `path` (named `name` in errors, default its file name): at most
    `limit` bytes, strict UTF-8, then parse_yaml. Every stack file, Pulumi.yaml and kubeconfig the
    tools read comes through here."""
    name = name or path.name
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise StackFileError(f"{name}: cannot read it: {exc.strerror}") from None
    if len(data) > limit:
        raise StackFileError(f"{name}: more than {limit // 1024} KiB, where a stack file is a few kilobytes; is it "
                             "the right file?")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StackFileError(f"{name}: not UTF-8 text (byte {exc.start}, 0x{data[exc.start]:02x}), as Pulumi "
                             "writes a stack file; is it the right file?") from None
    return parse_yaml(text, name)


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
        raise StackFileError(f"no stack file {path.name} in {root}; stacks here: {', '.join(stacks_in(root))}")
    return path


def stack_doc(stack: str, root: Optional[Path] = None) -> dict[str, Any]:
    """Pulumi.<stack>.yaml's `config:` map, as written (a StackFileError when it is not one)."""
    root = root or project_root()
    path = stack_file(stack, root)
    doc = read_yaml(path) or {}
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
