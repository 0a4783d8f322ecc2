"""Raw Pulumi config -> the resolved stack, or a ConfigError naming the stack file, each key and the fix.

Pulumi hands a program its config as `<namespace>:<key>` -> text (structured values as JSON text).
`load()` validates the `dynamo-lab:*` keys against `config.schema`, turns pydantic's errors into
messages a user can act on ("did you mean", the accepted values), resolves the stack (the per-stack
defaults and derived facts, infra/resolved.py), then runs the cross-key checks of `infra.validate`.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, Collection, Optional

from pydantic import BaseModel, ValidationError

from infra.config import engine_flags
from infra.config.fields import KeyProblem
from infra.config.schema import PROJECT, StackConfig
from infra.errors import ConfigError, stack_file
from infra.resolved import ResolvedStack, resolve
from infra.validate import problems as cross_key_problems


def _path(loc: tuple, raw: dict[str, Any]) -> str:
    """('workers', 0, 'replicas') -> 'workers.prefill.replicas' (group name when it has one)."""
    parts: list[str] = []
    node: Any = raw
    for item in loc:
        if isinstance(item, int):
            node = node[item] if isinstance(node, list) and item < len(node) else None
            name = node.get("name") if isinstance(node, dict) else None
            parts.append(name if isinstance(name, str) and name else f"[{item}]")
        else:
            parts.append(str(item))
            node = node.get(item) if isinstance(node, dict) else None
    return ".".join(parts).replace(".[", "[")


def _key_path(loc: tuple, data: dict[str, Any], err: Optional[dict[str, Any]] = None) -> str:
    """Where an error is, as the stack file spells it (the target's keys live under kubernetes:);
    a section's check about one of its keys (fields.KeyProblem) points at that key."""
    problem = (err or {}).get("ctx", {}).get("error")
    if isinstance(problem, KeyProblem):
        loc = (*loc, *problem.loc)
    if loc[:1] == ("target",) and len(loc) > 1:
        return KUBERNETES + str(loc[1])
    return _path(loc, data) or "(top level)"


def _valid_keys(loc: tuple) -> list[str]:
    """The camelCase keys allowed at the parent of `loc`, for 'did you mean' hints."""
    model: Any = StackConfig
    for item in loc[:-1]:
        if isinstance(item, int) or model is None:
            continue
        field = next((f for f in model.model_fields.values() if f.alias == item), None)
        if field is None:
            # Keys of a dict field (e.g. a GPU class name) lead to its value model.
            continue
        model = _section(field)
    if model is None:
        return []
    return [f.alias for f in _written(model)]


def _section(field: Any) -> Any:
    """The model a field's value is (itself, a list's items or a map's values), else None."""
    ann = field.annotation
    args = getattr(ann, "__args__", ())
    candidates = [ann, *args] + [a for arg in args for a in getattr(arg, "__args__", ())]
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)


def _written(model: Any) -> list[Any]:
    """A model's fields as a stack file writes them; `target` is filled from kubernetes:* keys, never
    written under dynamo-lab:."""
    return [f for name, f in model.model_fields.items() if f.alias and not (model is StackConfig and name == "target")]


def _homes(key: str) -> list[str]:
    """The sections (`workers`, `model`, ...) where `key` is a valid key: an unknown key that is one of
    them was most likely indented to the wrong depth."""
    homes, todo = [], [(StackConfig, "")]
    while todo:
        model, path = todo.pop(0)
        for field in _written(model):
            if field.alias == key and path:
                homes.append(path)
            if (sub := _section(field)) is not None and path.count(".") < 4:
                todo.append((sub, f"{path}.{field.alias}" if path else field.alias))
    return homes


# Settings that must be Pulumi secrets (`pulumi config set --secret`); their values are never shown.
SECRET_KEYS = ("hfToken",)

_HINTS = {
    "greater_than_equal": "write a number >= {ge}",
    "greater_than": "write a number > {gt}",
}

# A value of the wrong type: what it is not, and how to write one (pydantic's own text is for Python
# programmers: "Input should be a valid integer, unable to parse string as an integer"). The schema
# is strict (config/base.py): a value is taken as the type it was written as, so `int_type` is also
# the count written `true`, `"3"` or `2.0`, and `string_type` the name written `1`.
_TYPE_HINTS = {
    "int_parsing": "is not a whole number; write it in digits, e.g. `{key}: 2`",
    "int_type": "is not a whole number; write it in digits, e.g. `{key}: 2`",
    "int_from_float": "is not a whole number; write an integer, e.g. `{key}: 2`",
    "float_parsing": "is not a number; write it in digits, e.g. `{key}: 40` or `{key}: 0.5`",
    "float_type": "is not a number; write it in digits, e.g. `{key}: 40` or `{key}: 0.5`",
    "finite_number": "is not a finite number; write one in digits, e.g. `{key}: 0.5`",
    "bool_parsing": "is not true or false; write `{key}: true` or `{key}: false`",
    "bool_type": "is not true or false; write `{key}: true` or `{key}: false`",
    "list_type": "is not a list; write a YAML list, e.g. `{key}: [a, b]`, or one `- item` per line under it",
    "dict_type": "is not a map; write `key: value` pairs indented under `{key}:`",
    # A section (`model`, `workload`, a worker, ...) given one value, or left empty because its keys
    # were not indented under it: `dynamo-lab:model: Qwen/Qwen3-0.6B`.
    "model_type": "is not a map; write `key: value` pairs indented under `{key}:`",
    "string_type": "is not text; write it as a string, e.g. `{key}: \"...\"`",
}
# The same mistakes where the value says what was meant (_meant): a number in quotes, which YAML
# reads as text; a count with a point; a YAML 1.1 boolean, which Pulumi's reader (gopkg.in/yaml.v3,
# YAML 1.2) reads as text; a name that YAML read as a number or a boolean because it has no quotes.
_MEANT_HINTS = {
    ("int_type", "quoted number"): "is text, not a whole number, because it is quoted; write it without the "
                                   "quotes: `{key}: {bare}`",
    ("float_type", "quoted number"): "is text, not a number, because it is quoted; write it without the quotes: "
                                     "`{key}: {bare}`",
    ("int_type", "whole decimal"): "is not a whole number but a decimal; write it without the point: "
                                   "`{key}: {bare}`",
    ("bool_type", "yaml 1.1 word"): "is not true or false: Pulumi's YAML reader (YAML 1.2) reads only true and "
                                    "false as booleans, and yes, no, on and off as text; write `{key}: true` or "
                                    "`{key}: false`",
    ("string_type", "number"): "is a number, not text; write it in quotes: `{key}: \"{bare}\"`",
    ("string_type", "boolean"): "is not text; if you meant the word, write it in quotes: `{key}: \"{bare}\"`",
}
_YAML11_BOOLS = {"yes", "no", "on", "off", "y", "n"}


def _shown(value: Any) -> str:
    """A value as a message names it: as the stack file spells it (`true`, `null`), a map or a list by
    its kind, text and numbers as Python quotes them ('3' is text, 3 a number)."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return "a map" if isinstance(value, dict) else "a list"
    return repr(value)


def _meant(value: Any) -> tuple[str, str]:
    """What kind of slip a value is (a key of _MEANT_HINTS' second part, "" for none) and the value
    as it would have been written."""
    if isinstance(value, bool):
        return "boolean", str(value).lower()
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return "whole decimal", str(int(value))
    if isinstance(value, (int, float)):
        return "number", repr(value)
    if isinstance(value, str):
        bare = value.strip()
        if bare.lower() in _YAML11_BOOLS:
            return "yaml 1.1 word", bare
        if re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", bare) and len(bare) <= 30:
            return "quoted number", bare
    return "", ""


def _type_message(kind: str, value: Any, key: str) -> str:
    slip, bare = _meant(value)
    hint = _MEANT_HINTS.get((kind, slip), _TYPE_HINTS[kind])
    return f"{_shown(value)} {hint.format(key=key, bare=bare)}"


def _message(err: dict[str, Any]) -> str:
    kind = err["type"]
    if "extraArgs" in err["loc"]:  # a worker's flags: never a secret flag's value, in any spelling
        err = {**err, "input": engine_flags.mask_value(err.get("input"))}
    if err["loc"][:1] and err["loc"][0] in SECRET_KEYS:  # never echo a secret's value
        return "must be a single string (the token), set with pulumi config set --secret"
    if kind == "extra_forbidden":
        key = str(err["loc"][-1])
        valid = _valid_keys(err["loc"])
        close = difflib.get_close_matches(key, valid, n=1)
        if len(err["loc"]) == 1:  # a stack-file key: show it as written there
            key, close = f"{PROJECT}:{key}", [f"{PROJECT}:{c}" for c in close]
        parent = ".".join(str(p) for p in err["loc"][:-1] if isinstance(p, str))
        homes = [h for h in _homes(str(err["loc"][-1])) if h != parent][:3]
        sections = " or ".join(", ".join(f"`{h}`" for h in homes).rsplit(", ", 1))
        hint = f"; did you mean `{close[0]}`?" if close else (
            f"; it is a key of {sections}: indent it under {'that section' if len(homes) == 1 else 'the one you meant'}"
            ", level with the keys beside it there." if homes else "")
        listed = f" Valid keys here: {', '.join(valid)}." if valid else ""
        return f"unknown key `{key}`{hint}{listed}"
    if kind == "missing":
        return "required key is missing; add it"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return f"{_shown(err['input'])} is not allowed; write one of {expected}"
    if kind == "value_error":
        return str(err["ctx"]["error"])
    if kind in _HINTS:
        return f"{_shown(err['input'])} is not allowed: {_HINTS[kind].format(**err.get('ctx', {}))}"
    key = next((str(part) for part in reversed(err["loc"]) if isinstance(part, str)), "value")
    if kind in _TYPE_HINTS:
        return _type_message(kind, err["input"], key)
    if kind == "too_short":
        ctx = err.get("ctx", {})
        return (f"{err['input']!r} has {ctx.get('actual_length', 0)} items; it needs at least "
                f"{ctx.get('min_length', 1)}")
    return f"{err['msg']} (got {err.get('input')!r})"


# The integers Pulumi's reader holds (gopkg.in/yaml.v3: an int64, else a uint64); one beyond them
# in a stack file it reads as a rounded float or as text, and the lab's reader refuses it
# (dynamo_lab/bounded_read.py, INT_MIN and INT_MAX, which cannot import this).
INT_MIN, INT_MAX = -2**63, 2**64 - 1


class _HugeInt:
    """A JSON integer beyond INT_MIN..INT_MAX, kept as its length: json.loads converts an integer's
    text with int(), which raises a ValueError past 4,300 digits (sys.get_int_max_str_digits)."""

    def __init__(self, digits: int):
        self.digits = digits


def _json_int(text: str) -> Any:
    digits = len(text.lstrip("-"))
    if digits > 20:  # 2**64 has 20 digits: beyond them, without converting them
        return _HugeInt(digits)
    value = int(text)
    return value if INT_MIN <= value <= INT_MAX else _HugeInt(digits)


def _decode(raw: str) -> Any:
    """Pulumi hands structured config values over as JSON text, scalars as plain text."""
    text = raw.strip()
    if text[:1] in "{[":
        try:
            return json.loads(text, parse_int=_json_int)
        except json.JSONDecodeError:
            pass
    return raw


def _huge_ints(value: Any, loc: tuple) -> list[tuple[tuple, int]]:
    """Where a decoded value holds a _HugeInt, and its digits, in document order (without recursion:
    json.loads returns values nested nearly as deep as Python's recursion limit)."""
    found, todo = [], [(value, loc)]
    while todo:
        node, where = todo.pop()
        if isinstance(node, _HugeInt):
            found.append((where, node.digits))
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        todo.extend(reversed([(v, where + (k,)) for k, v in items]))
    return found


KUBERNETES = "kubernetes:"
CLUSTER_KEYS = ("context", "kubeconfig")


def _cluster(raw_config: dict[str, str], stack: str,
             foreign: dict[str, str]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The cluster keys (`kubernetes:context`, `kubernetes:kubeconfig`) and their problems."""
    found = {k[len(KUBERNETES):]: v for k, v in raw_config.items() if k.startswith(KUBERNETES)}
    problems = []
    for key in sorted(set(found) - set(CLUSTER_KEYS)):
        close = difflib.get_close_matches(key, CLUSTER_KEYS, n=1)
        # A slip of one of the two keys (kubernetes:contxt) is renamed, not removed: removing it
        # leaves the context unset, the problem below.
        meant = f", and write its value as `{KUBERNETES}{close[0]}` if that is what you meant" if close else ""
        problems.append((KUBERNETES + key, f"only Pulumi's default Kubernetes provider reads `{KUBERNETES}{key}`, "
                         "and this project uses an explicit provider built from kubernetes:context and "
                         f"kubernetes:kubeconfig alone, so it would be ignored. Remove it: pulumi config rm "
                         f"{KUBERNETES}{key} --stack {stack}{meant}"))
    if not found.get("context", "").strip():
        problems.append((KUBERNETES + "context", "not set: without it this stack would deploy to whatever "
                         "cluster your current kubectl context points at. Name the cluster it deploys to "
                         "(`kubectl config get-contexts -o name` lists yours): pulumi config set "
                         f"kubernetes:context <context> --stack {stack}"
                         + (f" (the stack file sets `{twin}`, in a misspelled namespace: rename it "
                            f"`{KUBERNETES}context`)" if (twin := _twin(KUBERNETES + "context", foreign)) else "")))
    return {k: v for k, v in found.items() if k in CLUSTER_KEYS}, problems


# The namespaces of the config keys this program reads, or that Pulumi itself reads (`pulumi:`).
NAMESPACES = (PROJECT, KUBERNETES[:-1], "pulumi")


def _foreign(raw_config: dict[str, str]) -> dict[str, str]:
    """Keys in a namespace nothing reads -> the key they were likely meant as ('' when none is close)."""
    out = {}
    for key in raw_config:
        namespace, _, rest = key.partition(":")
        if namespace in NAMESPACES:
            continue
        close = difflib.get_close_matches(namespace.lower().replace("_", "-"), NAMESPACES, n=1, cutoff=0.6)
        out[key] = f"{close[0]}:{rest}" if close else ""
    return out


def _namespace_problems(foreign: dict[str, str], stack: str) -> list[tuple[str, str]]:
    problems = []
    for key, meant in foreign.items():
        namespace = key.partition(":")[0]
        hint = f"; did you mean `{meant}`? Rename the key in {stack_file(stack)}" if meant else (
            f". Remove it: pulumi config rm {key} --stack {stack}")
        problems.append((key, f"unknown namespace `{namespace}:`: this program reads `{PROJECT}:` keys and "
                         f"`{KUBERNETES}context` / `{KUBERNETES}kubeconfig` only, so this key would be silently "
                         f"ignored{hint}"))
    return problems


def _twin(key: str, foreign: dict[str, str]) -> str:
    """For a missing key: the stack file's key in a misspelled namespace that was meant as it ('' if none)."""
    return next((k for k, meant in foreign.items() if meant == key), "")


def _plain_secrets(raw_config: dict[str, str], secret_keys: Collection[str], stack: str) -> list[tuple[str, str]]:
    """Secrets written in plain text in the stack file: refused, and never echoed."""
    return [(key, f"is written in plain text in the stack file, where anyone who can read the repository reads "
             f"it. Store it encrypted instead (remove the plain line first): pulumi config set --secret {key} "
             f"<your token> --stack {stack}")
            for key in SECRET_KEYS if f"{PROJECT}:{key}" in raw_config and f"{PROJECT}:{key}" not in secret_keys]


def load(raw_config: dict[str, str], stack: str, secret_keys: Collection[str] = ()) -> ResolvedStack:
    """Validate a stack's `dynamo-lab:*` and `kubernetes:*` keys and resolve the stack. Raises
    ConfigError on any problem.

    `secret_keys` are the config keys the stack stores encrypted (`pulumi config set --secret`);
    a secret setting outside them is refused.
    """
    prefix = PROJECT + ":"
    data, unreadable = {}, []
    for key, value in raw_config.items():
        if key.startswith(prefix):
            try:
                data[key[len(prefix):]] = _decode(value)
            except RecursionError:  # json.loads stops at Python's recursion limit, some 1,000 levels
                unreadable.append((key[len(prefix):], "its value is JSON nested more than a thousand levels deep, "
                                   "where a setting has a few; is it the right value?"))
    unreadable += [(_path(loc, data), f"an integer {digits:,} digits long, beyond the 64 bits in which Pulumi's "
                    f"YAML reader holds an integer ({INT_MIN:,} to {INT_MAX:,}); write the number you meant")
                   for key, value in data.items() for loc, digits in _huge_ints(value, (key,))]
    if unreadable:
        raise ConfigError(stack_file(stack), unreadable)
    foreign = _foreign(raw_config)
    cluster, cluster_problems = _cluster(raw_config, stack, foreign)
    cluster_problems = _namespace_problems(foreign, stack) + cluster_problems
    cluster_problems += _plain_secrets(raw_config, secret_keys, stack)
    for key in [k for k in ("target", "cluster") if k in data]:  # the target is named by kubernetes:* keys only
        del data[key]
        cluster_problems.insert(0, (key, f"unknown key `{prefix}{key}`: name the cluster with Pulumi's "
                                    f"own key: pulumi config set kubernetes:context <context> --stack {stack}"))
    data["target"] = cluster or None
    try:
        cfg = StackConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # A misspelled required key is one mistake, not two: keep "unknown key, did you mean X?"
        # and drop the "X is missing" it causes.
        misspelled = set()
        for e in errors:
            if e["type"] == "extra_forbidden":
                close = difflib.get_close_matches(str(e["loc"][-1]), _valid_keys(e["loc"]), n=1)
                misspelled.update(tuple(e["loc"][:-1]) + (c,) for c in close)
        def message(e: dict[str, Any]) -> str:
            twin = _twin(f"{prefix}{e['loc'][0]}", foreign) if e["type"] == "missing" and len(e["loc"]) == 1 else ""
            return (f"required key is missing: the stack file sets `{twin}`, in a misspelled namespace; rename "
                    f"it `{prefix}{e['loc'][0]}`" if twin else _message(e))
        problems = [(_key_path(e["loc"], data, e), message(e)) for e in errors
                    if not (e["type"] == "missing" and tuple(e["loc"]) in misspelled)
                    and not (e["loc"][:1] == ("target",) and cluster_problems)]
        raise ConfigError(stack_file(stack), cluster_problems + problems) from None
    if cluster_problems:
        raise ConfigError(stack_file(stack), cluster_problems)
    stack_resolved = resolve(cfg, stack)  # the per-stack defaults and derived facts, once
    problems = cross_key_problems(stack_resolved)
    if problems:
        raise ConfigError(stack_file(stack), problems)
    return stack_resolved
