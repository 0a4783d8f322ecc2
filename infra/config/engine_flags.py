"""A worker group's `extraArgs`, read the way the worker's parsers read them, to tell which setting
each entry changes: the check decides on what vLLM and Dynamo will take, not on what was typed.

A worker runs `python3 -m dynamo.vllm ARGS`, dynamo-lab's flags first and `extraArgs` after them.
Dynamo 1.6.1 (`dynamo/vllm/args.py`, `_parse_cli_args`) reads ARGS twice:
  1. its own `argparse.ArgumentParser(allow_abbrev=False)` takes Dynamo's flags
     (`--disaggregation-mode`, ...): exact names, `--flag value` or `--flag=value`;
  2. everything else goes to vLLM 0.31.0's `FlexibleArgumentParser` (`vllm/utils/argparse_utils.py`,
     `parse_args`; it leaves argparse's `allow_abbrev` on), which first
       - writes `_` as `-` in a `--` flag's name up to its first `.` (`--max_model_len`),
       - turns `-O3`, `-O=3` and `-O 3` into `--optimization-level 3`,
       - gathers the dotted keys of a JSON flag (`--kv-transfer-config.kv_role kv_both`,
         `--kv_transfer_config.kv_role=kv_both`, `--x.list+ a,b`) into one `--kv-transfer-config
         '{"kv_role": "kv_both"}'` appended after all the others, so it replaces the whole JSON,
       - reads `--config FILE` as more flags from a YAML file,
     then argparse takes an unambiguous prefix of a flag as the flag (`--max-model 4096`,
     `--kv-cache-mem 1G`; `-t 2` for `-tp 2`), and the last of a repeated flag wins.
A managed flag is matched by its name so normalized, by any prefix of it (a prefix several flags
share makes vLLM exit at start, so refusing it costs nothing), and by its aliases
(`--device-memory-utilization` is `--gpu-memory-utilization`, `-tp` is `--tensor-parallel-size`).
The engine tier (tests/engine) runs the real parsers over the shipped stacks and over the spellings
the fast tests refuse, and checks the effective values against the sizing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# The one managed flag extraArgs may set: a group's own context length, checked like
# workload.maxModelLen (config.checks) and written by dynamo-lab in its place.
CONTEXT_FLAG = "--max-model-len"


@dataclass(frozen=True)
class Managed:
    """A flag dynamo-lab writes itself or that the sizing rests on."""

    options: tuple[str, ...]  # every option string the parser knows it by, the canonical first
    fix: str  # what to write instead, for the refusal
    why: str = "which dynamo-lab writes itself or its sizing rests on"


_REPLICAS = "Scale with the group's replicas instead: each worker has one GPU"
_POOL = "Set the group's kvCacheBytes instead: dynamo-lab pins the KV pool and derives the GPU share from it"
_REVISION = ("Set model.revision instead: the pre-pull downloads that one commit and the workers read only it, "
             "offline")
MANAGED = (
    Managed(("--model",), "Set model.name instead"),
    Managed(("--disaggregation-mode",), "Set the group's role instead"),
    Managed(("--kv-transfer-config",), "Set the group's kvTransfer instead (connector, bufferDevice; the KV role "
                                       "follows from role)"),
    Managed(("--kv-events-config",), "Set frontend.routerMode instead (kv: the workers publish KV events)"),
    Managed(("--kv-cache-memory-bytes",), "Set the group's kvCacheBytes instead"),
    Managed(("--gpu-memory-utilization", "--device-memory-utilization"), _POOL),
    Managed(("--num-gpu-blocks-override",), _POOL),
    # The sizing, the prefix-cache model and the probe all rest on 16-token blocks (one 64 KiB
    # descriptor per layer-block for Qwen3-0.6B); another size would make every figure wrong.
    Managed(("--block-size",), "Remove it: dynamo-lab writes --block-size 16, which its sizing rests on"),
    Managed(("--revision",), _REVISION),
    Managed(("--tokenizer-revision",), _REVISION),
    Managed(("--code-revision",), _REVISION),
    # The workers read the model from the cache dynamo-lab mounts (HF_HUB_CACHE), offline.
    Managed(("--download-dir",), "Remove it: the workers read the model from the cache modelCache mounts",
            "which would have the workers look for the model outside the cache dynamo-lab fills"),
    # A token in the pod spec would be plain text; the workers that read the pre-pulled cache need none.
    Managed(("--hf-token",), "Remove it and set hfToken, a Pulumi secret, which reaches only what downloads from "
                             "the Hub", "which would write the token into the pod spec in plain text"),
    # The model's config.json as the sizing read it: layers, KV heads, head size, context.
    Managed(("--hf-overrides",), "Describe another geometry with model.layers, model.kvHeads and model.headDim "
                                 "instead (the sizing's KV bytes per token)"),
    # The sizing takes KV bytes per token from model.dtype; another cache dtype would change them.
    Managed(("--kv-cache-dtype",), "Set model.dtype instead (the sizing's KV bytes per token come from it)"),
    Managed(("--tensor-parallel-size", "-tp"), _REPLICAS),
    Managed(("--pipeline-parallel-size", "-pp"), _REPLICAS),
    Managed(("--data-parallel-size", "-dp"), _REPLICAS),
    # vLLM reads more flags from the file, which nothing here can see.
    Managed(("--config",), "Write the flags in extraArgs instead, where they are checked",
            "which reads more flags from a file no check here can see"),
    Managed((CONTEXT_FLAG,), "Write it as a token count"),
)
_BY_OPTION = {option: m for m in MANAGED for option in m.options}
# The parsers' own flags that are a prefix of a managed one: argparse takes an exact flag before any
# abbreviation, so these are themselves (`--tokenizer` is not `--tokenizer-revision`). The engine
# tier checks this against every option vLLM 0.31.0's and Dynamo 1.6.1's parsers know.
OPTIONS_WITHIN_MANAGED = ("--tokenizer",)
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's: a value, not a flag


@dataclass(frozen=True)
class Given:
    """One flag of extraArgs: where, as typed, and what the parsers make of it."""

    text: str
    name: str  # normalized: `_` as `-` up to the first `.`, without `=value` or a dotted key
    flag: Optional[Managed]  # the managed flag it sets, or None
    how: str  # "" (its own name), "abbreviation", "dotted key", "spelling"
    value: Optional[str]  # `=value`, else the next entry when it is not a flag; None: none given


def is_flag(arg: str) -> bool:
    """Whether argparse reads `arg` as a flag (not a value): a leading `-`, not a negative number."""
    return arg.startswith("-") and len(arg) > 1 and not _NEGATIVE_NUMBER.match(arg) and " " not in arg


def _resolve(name: str) -> tuple[Optional[Managed], bool]:
    """The managed flag `name` is, or may be a prefix of (argparse's abbreviations), and whether by prefix."""
    if name in _BY_OPTION:
        return _BY_OPTION[name], False
    if name in ("-", "--") or name in OPTIONS_WITHIN_MANAGED:
        return None, False
    for option, managed in _BY_OPTION.items():
        # A single-dash prefix matches single-dash options only; a `--` one, `--` options.
        if option.startswith(name) and (name.startswith("--") == option.startswith("--")):
            return managed, True
    return None, False


def read(args: list[str]) -> list[Given]:
    """Every flag in `args`, resolved as vLLM 0.31.0's and Dynamo 1.6.1's parsers would."""
    found = []
    for i, arg in enumerate(args):
        if not is_flag(arg) or (arg.startswith("-O") and not arg.startswith("--")):
            continue  # a value; or `-O...`, vLLM's --optimization-level (no managed setting)
        key, eq, explicit = arg.partition("=")
        # The dotted keys of `-x.a` gather under `-x` too; only `--` names have `_` written as `-`.
        base, dot, _ = key.partition(".")
        dotted = bool(dot)
        name = "--" + base[2:].replace("_", "-") if base.startswith("--") else base
        flag, by_prefix = _resolve(name)
        how = ("dotted key" if dotted else "abbreviation" if by_prefix
               else "spelling" if flag is not None and key != name else "")
        following = args[i + 1] if i + 1 < len(args) and not is_flag(args[i + 1]) else None
        found.append(Given(arg, name, flag, how, explicit if eq else following))
    return found


def refusal(given: Given) -> Optional[str]:
    """Why `given` may not be in extraArgs, or None. Only the context length is the group's to set."""
    flag = given.flag
    if flag is None or (flag.options[0] == CONTEXT_FLAG and given.how != "dotted key"):
        return None
    # Never the value: it may be a token (`--hf-token=hf_...`).
    typed = given.text.split("=", 1)[0] + ("=..." if "=" in given.text else "")
    read_as = {"": "", "spelling": f", which vLLM reads as {flag.options[0]},",
               "abbreviation": f", a prefix vLLM's parser takes for {flag.options[0]} (argparse abbreviations),",
               "dotted key": f", a dotted key that vLLM turns into a whole {flag.options[0]} JSON,"}[given.how]
    if flag.options[0] == CONTEXT_FLAG:
        return (f"{typed!r}{read_as} is not a token count. Write {CONTEXT_FLAG} N (e.g. {CONTEXT_FLAG} "
                "8192), or remove it to use workload.maxModelLen")
    return f"{typed!r}{read_as} sets {flag.options[0]}, {flag.why}. {flag.fix}"


def value(args: list[str], flag: str) -> Optional[str]:
    """The value vLLM takes for managed `flag` from `args`: the last one given in any spelling (""
    when the last has none); None when it is not given."""
    values = [g.value or "" for g in read(args) if g.flag is not None and g.flag.options[0] == flag]
    return values[-1] if values else None
