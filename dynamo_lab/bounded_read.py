"""The one bounded reader of files the tools did not write: at most so many bytes of a file or stream
(`bounded_bytes`), and one YAML document within bounds of depth, values and the text its aliases
expand to (`parse_yaml`, `read_yaml`). The lab's stack file reader (dynamo_lab/stack_files.py), the
preflight's `--from FILE` (dynamo_lab/preflight/cluster_data.py) and the local cluster's commands,
which run as root (a pull request's stack file, a kubeconfig, the workspace's own file), all read
through here; each words its refusals as it always has.

Standard library and PyYAML, and nothing of the project: the Pulumi driver (pulumi_driver.py)
imports pulumi_workspace.py and stack_overrides.py as a script's siblings, and they import this.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO, Optional, Union

import yaml

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
# The text of every value, keys included, once the aliases are written out: constructing an alias of
# a string costs nothing (it is the same object), but whatever writes the document out (json.dumps of
# each setting, the workspace's safe_dump) writes it once per alias: 4,900 aliases of one 250 KiB
# string are 1.2 GB from a file of 256 KiB. Without aliases a value's text is never longer than its
# source, so a file within MAX_YAML_BYTES is never refused for this.
MAX_YAML_TEXT = MAX_YAML_BYTES


class TooLarge(Exception):
    """bounded_bytes found more than `limit` bytes."""

    def __init__(self, limit: int):
        super().__init__(f"more than {limit} bytes")
        self.limit = limit


class Unreadable(ValueError):
    """What read_yaml or parse_yaml refused: one line naming the file, where and why."""


def bounded_bytes(source: Union[str, Path, BinaryIO], limit: int) -> bytes:
    """At most `limit` bytes of the file `source` (a path, followed as open follows it) or of the
    binary stream `source`: TooLarge when it holds more, read no further (/dev/zero, a pipe that
    never ends); OSError as open and read raise it."""
    if hasattr(source, "read"):
        data = source.read(limit + 1)
    else:
        with open(source, "rb") as f:
            data = f.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(limit)
    return data


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


def _expanded(root: yaml.Node, max_text: int = MAX_YAML_TEXT) -> None:
    """Refuse a node graph whose aliases expand past MAX_YAML_VALUES values, MAX_YAML_DEPTH levels or
    `max_text` characters of values, or name a value they are inside (one without end): each node's
    expanded size, depth and text once, bottom up, without recursion (an alias chain can be deeper
    than the text)."""
    done: dict[int, tuple[int, int, int]] = {}  # id(node) -> (values, depth, characters) it expands to
    open_: set[int] = set()  # the nodes whose children are being counted: the path from the root
    todo: list[tuple[yaml.Node, bool]] = [(root, False)]
    while todo:
        node, counted = todo.pop()
        key = id(node)
        if counted:
            open_.discard(key)
            kids = [done[id(k)] for k in _children(node)]
            values, depth = 1 + sum(v for v, _, _ in kids), 1 + max((d for _, d, _ in kids), default=0)
            text = sum(t for _, _, t in kids) + (len(node.value) if isinstance(node, yaml.ScalarNode) else 0)
            if values > MAX_YAML_VALUES:
                raise _Refused(f"its aliases (*name) expand to more than {MAX_YAML_VALUES:,} values, where a stack "
                               "file has a few hundred", node.start_mark)
            if depth > MAX_YAML_DEPTH:
                raise _Refused(f"its aliases (*name) nest it more than {MAX_YAML_DEPTH} levels deep",
                               node.start_mark)
            if text > max_text:
                raise _Refused(f"its aliases (*name) expand to more than {max_text // 1024} KiB of text, where a "
                               "stack file is a few kilobytes", node.start_mark)
            done[key] = (values, depth, text)
        elif key in open_:
            raise _Refused("an alias (*name) inside the value it names, which would never end", node.start_mark)
        elif key not in done:
            open_.add(key)
            todo.append((node, True))
            todo.extend((k, False) for k in _children(node) if id(k) not in done)


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "its start"


def parse_yaml(text: str, name: str) -> Any:
    """One YAML document from `text` (of the file `name`), with the reader's bounds; Unreadable, one
    line naming the file, where and why, when it is not one."""
    try:
        loader = _BoundedLoader(text, name)
    except yaml.reader.ReaderError as exc:  # a control character, refused before anything is parsed
        line = text.count("\n", 0, exc.position) + 1
        raise Unreadable(f"{name}: not YAML text: character U+{exc.character:04X} at line {line} is one YAML "
                         "does not allow (a control character); is it the right file?") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded(node, max(MAX_YAML_TEXT, len(text)))
        return loader.construct_document(node)
    except _Refused as exc:
        raise Unreadable(f"{name}: refused at {_where(exc.mark)}: {exc.why}; is it the right file?") from None
    except yaml.MarkedYAMLError as exc:
        problem = " ".join(f"{exc.problem or exc.context or 'not valid YAML'}".split())
        raise Unreadable(f"{name}: not valid YAML at {_where(exc.problem_mark or exc.context_mark)}: "
                         f"{problem}") from None
    except yaml.YAMLError as exc:
        raise Unreadable(f"{name}: not valid YAML: {' '.join(str(exc).split())}") from None
    finally:
        loader.dispose()


def read_yaml(path: Path, name: Optional[str] = None, limit: int = MAX_YAML_BYTES) -> Any:
    """The YAML document of the file `path` (named `name` in errors, default its file name): at most
    `limit` bytes (bounded_bytes), strict UTF-8, then parse_yaml; Unreadable when it is not one."""
    name = name or path.name
    try:
        data = bounded_bytes(path, limit)
    except OSError as exc:
        raise Unreadable(f"{name}: cannot read it: {exc.strerror}") from None
    except TooLarge:
        raise Unreadable(f"{name}: more than {limit // 1024} KiB, where a stack file is a few kilobytes; is it "
                         "the right file?") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"{name}: not UTF-8 text (byte {exc.start}, 0x{data[exc.start]:02x}), as Pulumi "
                         "writes a stack file; is it the right file?") from None
    return parse_yaml(text, name)
