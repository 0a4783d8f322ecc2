"""The one bounded reader of files the tools did not write: at most so many bytes of a file or stream
(`bounded_bytes`), and one YAML document within bounds of depth, values and the text its aliases
expand to (`parse_yaml`, `read_yaml`), its plain scalars typed and its keys checked as the Pulumi
CLI's own reader (gopkg.in/yaml.v3) types and checks them. The lab's stack file reader
(dynamo_lab/stack_files.py), the preflight's `--from FILE` (dynamo_lab/preflight/cluster_data.py) and
the local cluster's commands, which run as root (a pull request's stack file, a kubeconfig, the
workspace's own file), all read through here; each words its refusals as it always has.

Standard library and PyYAML, and nothing of the project: the Pulumi driver (pulumi_driver.py)
imports pulumi_workspace.py and stack_overrides.py as a script's siblings, and they import this.
"""

from __future__ import annotations

import copy
import math
import re
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


# --- Plain scalars as Pulumi's reader types them ------------------------------------------------
# The Pulumi CLI reads a stack file with gopkg.in/yaml.v3, which types an unquoted scalar by YAML
# 1.2's core schema (resolve.go, `resolve`), not PyYAML's YAML 1.1: only true/True/TRUE and
# false/False/FALSE are booleans (`yes`, `no`, `on`, `off`, `y`, `n` are text); `~`, `null`, `Null`,
# `NULL` and nothing are null; an integer is what Go's strconv.ParseInt/ParseUint read with base 0
# once `_` are removed (decimal, 0x, 0o, 0b, and YAML 1.1's 0777 as octal, which yaml.v3 keeps);
# a float matches yamlStyleFloat (`1e5`, `1.`, `.5`, `08`), or is .inf/.nan, and one past float64's
# range is text; a 1.1 sexagesimal (`1:30`) is text, and so is `=`. Read with PyYAML's own schema,
# `tensorParallel: yes` would reach the schema as true, which the program under the real CLI never
# sees: it gets the text "yes". Timestamps are left to PyYAML (yaml.v3 types the same YYYY-MM-DD
# forms as times; no setting takes one, both hand them on as text).
INT_MIN, INT_MAX = -2**63, 2**64 - 1  # yaml.v3 holds an integer in an int64, else a uint64
_TAG = "tag:yaml.org,2002:"
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_NULLS = {"", "~", "null", "Null", "NULL"}
_SPECIAL_FLOATS = {**{v: float("nan") for v in (".nan", ".NaN", ".NAN")},
                   **{s + v: float(s + "inf") for s in ("", "+", "-") for v in (".inf", ".Inf", ".INF")}}
# Go's integer syntax with base 0 (its octal without 0o included), once yaml.v3 has removed the `_`.
_INT = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|0[0-7]*|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")  # yaml.v3's yamlStyleFloat
_DOT_FLOAT = re.compile(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?")  # what Go's ParseFloat reads of a text starting with `.`
_TIMESTAMP = next(rx for rx in yaml.SafeLoader.yaml_implicit_resolvers["2"] if rx[0] == _TAG + "timestamp")[1]


def _finite(text: str) -> bool:
    return math.isfinite(float(text))


def _plain_tag(value: str) -> str:
    """The tag yaml.v3 resolves an unquoted scalar to (resolve.go: the first character decides what
    it may be, then the map of words, then timestamp, integer and float)."""
    if value in _BOOLS:
        return _TAG + "bool"
    if value in _NULLS:
        return _TAG + "null"
    if value in _SPECIAL_FLOATS:
        return _TAG + "float"
    if value == "<<":
        return _TAG + "merge"
    if value[0] == "." and _DOT_FLOAT.fullmatch(value) and _finite(value):
        return _TAG + "float"
    if value[0] in "+-0123456789":
        plain = value.replace("_", "")
        if _TIMESTAMP.match(value):
            return _TAG + "timestamp"
        if _INT.fullmatch(plain):
            return _TAG + "int"  # whatever its size: one beyond 64 bits is refused before it is built
        if _FLOAT.fullmatch(plain) and _finite(plain):
            return _TAG + "float"
    return _TAG + "str"


def _int_text(text: str) -> Optional[tuple[int, str, int]]:
    """(sign, digits, base) of an integer in Go's syntax (`_` removed), None when it is not one."""
    plain = text.replace("_", "")
    if not _INT.fullmatch(plain):
        return None
    sign = -1 if plain[0] == "-" else 1
    digits = plain.lstrip("+-")
    prefix = digits[:2].lower()
    if prefix in ("0x", "0b", "0o"):
        return sign, digits[2:], {"0x": 16, "0b": 2, "0o": 8}[prefix]
    return (sign, digits[1:] or "0", 8) if digits[0] == "0" else (sign, digits, 10)


def int_out_of_range(value: Union[int, str]) -> Optional[str]:
    """Why `value` (an int, or an integer's text) is not an integer Pulumi's reader holds (None: it is
    one), in words for a one-line refusal. Counted from its text before any conversion: Python
    refuses to convert an integer of more than 4,300 digits to or from text (sys.get_int_max_str_digits)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if INT_MIN <= value <= INT_MAX:
            return None
        bits = value.bit_length()  # its digits, counted without writing them out past Python's limit
        digits = f"{len(str(abs(value))):,}" if bits < 14_000 else f"about {int(bits * math.log10(2)) + 1:,}"
        return f"is an integer {digits} digits long, {_RANGE}"
    parsed = _int_text(value)
    if parsed is None:
        return None
    sign, digits, base = parsed
    digits = digits.lstrip("0") or "0"
    if len(digits) <= 64 and INT_MIN <= sign * int(digits, base) <= INT_MAX:
        return None
    kind = {16: "a hexadecimal integer", 8: "an octal integer", 2: "a binary integer", 10: "an integer"}[base]
    return f"is {kind} {len(digits):,} digits long, {_RANGE}"


_RANGE = (f"beyond the 64 bits in which Pulumi's YAML reader holds an integer ({INT_MIN:,} to {INT_MAX:,}); "
          "write the number you meant")


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose scanner and composer stop at MAX_YAML_DEPTH levels, before Python's recursion
    limit, and at MAX_YAML_VALUES values written (PyYAML in Python composes some 20,000 a second,
    10,000 on a busy machine); its plain scalars typed as yaml.v3 types them (_plain_tag)."""

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

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0]:  # plain (unquoted, untagged): as yaml.v3 reads it
            return _plain_tag(value)
        return super().resolve(kind, value, implicit)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        # Go's syntax (0o17, 0777 and 0x1F alike), which PyYAML's 1.1 constructor reads otherwise.
        parsed = _int_text(self.construct_scalar(node))
        digits = (parsed[1].lstrip("0") or "0") if parsed else ""
        if not digits or len(digits) > 64:  # _checked refused one past 64 bits before construction
            raise yaml.constructor.ConstructorError(None, None, f"{_key_text(node)!r} is not an integer",
                                                    node.start_mark)
        return parsed[0] * int(digits, parsed[2])

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = self.construct_scalar(node)
        return _SPECIAL_FLOATS[value] if value in _SPECIAL_FLOATS else float(value.replace("_", ""))


_BoundedLoader.add_constructor(_TAG + "int", _BoundedLoader.construct_yaml_int)
_BoundedLoader.add_constructor(_TAG + "float", _BoundedLoader.construct_yaml_float)


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


def _key_text(node: yaml.Node) -> str:
    text = node.value if isinstance(node, yaml.ScalarNode) else "?"
    return text if len(text) <= 60 else text[:57] + "..."


def _checked(root: yaml.Node, name: str) -> None:
    """Refuse, in document order, a mapping that writes a key twice and an integer beyond 64 bits, as
    Pulumi's reader refuses the one and cannot hold the other (Unreadable, one line). yaml.v3 refuses
    a key written twice in any mapping (decode.go, `mapping`: "mapping key %q already defined at line
    %d"), comparing keys as written (`2` and `"2"` are one key), where PyYAML keeps the last silently.
    Each node once (an alias is the node it names), without recursion; _expanded bounded them."""
    seen: set[int] = set()
    todo: list[tuple[yaml.Node, str]] = [(root, "")]
    while todo:
        node, path = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            why = int_out_of_range(node.value) if node.tag == _TAG + "int" else None
            if why:
                raise Unreadable(f"{name}: `{path or '(the document)'}` at {_where(node.start_mark)} {why}")
        elif isinstance(node, yaml.MappingNode):
            first: dict[str, yaml.Node] = {}
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in first:
                        raise Unreadable(f"{name}: key `{_key_text(key)}` is written twice, at lines "
                                         f"{first[key.value].start_mark.line + 1} and {key.start_mark.line + 1}; "
                                         "keep one")
                    first[key.value] = key
            children = [(part, f"{path}.{_key_text(key)}".lstrip(".")) for key, value in node.value
                        for part in (key, value)]
            todo.extend(reversed(children))
        elif isinstance(node, yaml.SequenceNode):
            todo.extend(reversed([(item, f"{path}[{i}]") for i, item in enumerate(node.value)]))


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "its start"


# What parse_yaml read, by its text and name: a command (and a test run) reads the same stack files
# and Pulumi.yaml many times (advise loads its base for every candidate), and the pure-Python parser
# the bounds need costs milliseconds a file. Only documents that parsed are kept, a few hundred at
# most; each caller gets its own copy.
_PARSED: dict[tuple[str, str], Any] = {}
_PARSED_MAX = 512


def parse_yaml(text: str, name: str) -> Any:
    """One YAML document from `text` (of the file `name`), with the reader's bounds; Unreadable, one
    line naming the file, where and why, when it is not one."""
    key = (text, name)
    if key not in _PARSED:
        doc = _parse(text, name)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = doc
    return copy.deepcopy(_PARSED[key])


def _indent_hint(problem: str) -> str:
    """The fix for the two errors a key at the wrong indentation gives (PyYAML's words): a key
    deeper than the keys beside it ('mapping values are not allowed here') or between two levels
    ('expected <block end>, but found ...')."""
    if problem == "mapping values are not allowed here" or problem.startswith("expected <block end>"):
        return ("; YAML nests keys by their indentation: line this key up with the keys beside it (spaces, "
                "not tabs), or put it under a key that ends with ':'")
    return ""


def _parse(text: str, name: str) -> Any:
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
        _checked(node, name)
        return loader.construct_document(node)
    except _Refused as exc:
        raise Unreadable(f"{name}: refused at {_where(exc.mark)}: {exc.why}; is it the right file?") from None
    except yaml.MarkedYAMLError as exc:
        problem = " ".join(f"{exc.problem or exc.context or 'not valid YAML'}".split())
        raise Unreadable(f"{name}: not valid YAML at {_where(exc.problem_mark or exc.context_mark)}: "
                         f"{problem}{_indent_hint(problem)}") from None
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
