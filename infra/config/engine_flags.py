"""A worker group's `extraArgs`, read the way the worker's parsers read them, to tell which setting
each entry changes: the check decides on what vLLM and Dynamo will take, not on what was typed.

A worker runs `python3 -m dynamo.vllm ARGS`, dynamo-lab's flags first and `extraArgs` after them.
Dynamo 1.6.1 (`dynamo/vllm/args.py`, `_parse_cli_args`) reads ARGS twice:
  1. its own `argparse.ArgumentParser(allow_abbrev=False)` takes Dynamo's flags
     (`--disaggregation-mode`, ...): exact names, `--flag value` or `--flag=value`;
  2. everything else goes to vLLM 0.31.0's `FlexibleArgumentParser` (`vllm/utils/argparse_utils.py`,
     `parse_args`; it leaves argparse's `allow_abbrev` on), which first, element by element,
       - writes `_` as `-` in a `--` element's name, up to its first `=` and first `.`
         (`--max_model_len`, `--block_size= 32`),
       - turns `-O3` and `-O=3` into `--optimization-level 3`,
       - gathers every element that starts with `-` and has a `.` before any `=` (a dotted key of a
         JSON flag: `--kv-transfer-config.kv_role kv_both`, `--kv_transfer_config.kv_role=kv_both`,
         `--x.list+ a,b`), with the next element as its value when it has no `=`, into one
         `--kv-transfer-config '{"kv_role": "kv_both"}'` appended after all the others, so it
         replaces the whole JSON,
       - reads `--config FILE` as more flags from a YAML file,
     then hands the list to argparse.
argparse (CPython 3.12's `_parse_optional` and `_get_option_tuples`, the same in 3.11, which the
engine tier runs) takes an element as an option when it is one of the parser's option strings; when
the part before its first `=` is one (`--block-size= 32`: the value ` 32`, whitespace and all); when
it or that part is a prefix of exactly one option string (`--kv-cache-mem 1G`; `-t 2` for `-tp 2`;
several: vLLM exits); or when its first two characters are a two-character option (`-qfp8` is
`-q fp8`). Only then does whitespace make no difference: an element that is none of these and holds
a space, or looks like a negative number, is a value. The types vLLM gives its flags (`int`,
`float`, `human_readable_int`, `json.loads`) strip the whitespace of a value, so `--block-size= 32`
is block size 32; the last of a repeated flag wins.
Each element is judged on its own, wherever it stands (issue 43): as if it stood where argparse
reads options, none skipped because an earlier element might take it as its value. Whether an
element is a value depends on what stands before it, and on which of the worker's three parsers
reads it: Dynamo's own (a space or a negative number makes an element a value of its flags), its
router's (`dynamo/common/configuration/groups/router_args.py`, `parse_worker_router_config`: a
third argparse, abbreviations on, over what Dynamo's left) and vLLM's, whose FlexibleArgumentParser
gives a dotted key without `=` the next element whatever it is (`-1.5` is such a key to it, a
number to argparse). An imitation of all that drifts; this rule does not: an element that would set
a managed setting if read as an option is refused, even where the parsers would take it as a value
(`--seed --block-size` is refused, though argparse would exit on it), which can only refuse more.
A managed flag is matched by its name so normalized, by an argparse prefix of it, and by its
aliases (`--device-memory-utilization` is `--gpu-memory-utilization`, `-tp` is
`--tensor-parallel-size`). One reading is wider than argparse's on purpose: `-t=2` (the part before
`=` a prefix of `-tp`), which CPython up to 3.13.0 does not match and newer ones may; refusing it
costs nothing, as vLLM exits on it either way.
The values dynamo-lab reads from extraArgs (a group's own `--max-model-len`; the scheduler limits
the predictor reads, READ) are the last one given, as vLLM takes them, and hold only where nothing
before them can change how they are read. So three things whose reading depends on their place are
refused as well: such a flag written with a space in its element (`--max-num-seqs= 8`: Dynamo's
parser would take it for the value of one of its own flags before it), a dotted key without `=`
followed by a flag or by nothing (vLLM would take the flag for the key's value, or fail), and `--`
(argparse reads everything after it as a positional argument: the worker exits). A prefix vLLM's
parser finds ambiguous (`--max`, `--max-num-s`) is refused, and so is a value vLLM would not run
with (`--max-num-seqs 8k`: vLLM reads that flag with int()), never guessed.
The engine tier (tests/engine) runs the real parsers over the shipped stacks, over the spellings
the fast tests refuse and take, and over generated lists (test_positions.py): for every list the
check takes, each managed setting is the stack's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from infra.config.fields import vllm_int

# The one managed flag extraArgs may set: a group's own context length, checked like
# workload.maxModelLen (infra.validate) and written by dynamo-lab in its place.
CONTEXT_FLAG = "--max-model-len"
CONFIG_FILE_FLAG = "--config"


@dataclass(frozen=True)
class Managed:
    """A flag dynamo-lab writes itself or that the sizing rests on."""

    options: tuple[str, ...]  # every option string the parser knows it by, the canonical first
    fix: str  # what to write instead, for the refusal
    why: str = "which dynamo-lab writes itself or its sizing rests on"
    secret: bool = False  # its value is never shown, in any spelling


_REPLICAS = "Scale with the group's replicas instead: each worker has one GPU"
_TENSOR = ("Set the group's tensorParallel instead: it requests that many whole GPUs per pod and sizes the weights "
           "and KV per GPU")
_POOL = "Set the group's kvCacheBytes instead: dynamo-lab pins the KV pool and derives the GPU share from it"
_REVISION = ("Set model.revision instead: the pre-pull downloads that one commit and the workers read only it, "
             "offline")
_GEOMETRY = ("Describe another geometry with model.layers, model.kvHeads and model.headDim instead (the sizing's KV "
             "bytes per token)")
# The sizing's GPU figure per worker is model.parameters x model.dtype bytes of weights, all of them
# on the GPU (infra/sizing: weights_bytes, gpu_bytes_per_worker), and its host floor has none of them.
_WEIGHTS_WHERE = ("Remove it: not supported, the sizing counts every weight on the GPU (model.parameters x "
                  "model.dtype bytes) and none in the worker's host memory (its memory limit)")
_OFFLOAD = "which moves weights from the GPU into the worker's host memory"
_SPECULATIVE = ("Remove it: not supported, the sizing counts one model's weights and KV on each worker's GPU",
                "which adds a draft model, its weights and its KV, on the GPU")
_KV_OFFLOAD = ("Remove it: not supported, the KV pool is kvCacheBytes on the GPU, mirrored in host memory only "
               "with kvTransfer.bufferDevice cpu (the host floor counts that mirror)",
               "which adds a host-memory KV tier, and its connector, that the sizing's host floor and kvTransfer "
               "do not have")
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
                             "the Hub", "which would write the token into the pod spec in plain text", secret=True),
    # The model's config.json as the sizing read it: layers, KV heads, head size, context.
    Managed(("--hf-overrides",), _GEOMETRY),
    Managed(("--hf-config-path",), _GEOMETRY, "which reads another config.json than the one whose layers, KV heads, "
                                              "head size and context the sizing's geometry describes"),
    # The sizing takes KV bytes per token from model.dtype; another cache dtype would change them.
    Managed(("--kv-cache-dtype",), "Set model.dtype instead (the sizing's KV bytes per token come from it)"),
    # vLLM's default, auto, is the checkpoint's torch_dtype, for the weights and the KV cache alike: the
    # bytes per value the sizing takes from model.dtype (weights, KV per token, the model cache).
    Managed(("--dtype",), "Remove it: the workers run the checkpoint's own dtype (vLLM's auto), which model.dtype "
                          "describes to the sizing", "which changes the weights' and the KV cache's bytes per value, "
                                                     "the sizing's from model.dtype"),
    Managed(("--quantization", "-q"), "Remove it: not supported, the sizing counts unquantized weights of "
                                      "model.dtype", "which changes the weights' bytes on the GPU"),
    Managed(("--quantization-config",), "Remove it: not supported, the sizing counts unquantized weights of "
                                        "model.dtype", "which changes the weights' bytes on the GPU"),
    Managed(("--cpu-offload-gb",), _WEIGHTS_WHERE, _OFFLOAD),
    Managed(("--cpu-offload-params",), _WEIGHTS_WHERE, _OFFLOAD),
    Managed(("--offload-backend",), _WEIGHTS_WHERE, _OFFLOAD),
    Managed(("--offload-group-size",), _WEIGHTS_WHERE, _OFFLOAD),
    Managed(("--offload-num-in-group",), _WEIGHTS_WHERE, _OFFLOAD),
    Managed(("--offload-prefetch-step",), _WEIGHTS_WHERE, _OFFLOAD),
    Managed(("--offload-params",), _WEIGHTS_WHERE, _OFFLOAD),
    Managed(("--kv-offloading-size",), *_KV_OFFLOAD),
    Managed(("--kv-offloading-backend",), *_KV_OFFLOAD),
    Managed(("--speculative-config", "-sc"), *_SPECULATIVE),
    Managed(("--spec-method",), *_SPECULATIVE),
    Managed(("--spec-model",), *_SPECULATIVE),
    Managed(("--spec-tokens",), *_SPECULATIVE),
    Managed(("--enable-lora",), "Remove it: not supported, the sizing counts the base model's weights alone on the "
                                "GPU", "which reserves GPU memory for LoRA adapters"),
    # A decode worker's warm transfers and the chance it holds a prefix (TransferSizing) assume vLLM's
    # prefix cache, on by default; only turning it off is refused.
    Managed(("--no-enable-prefix-caching",), "Remove it: the sizing's warm transfers and decode prefix hits rest "
                                             "on vLLM's prefix cache, on by default",
            "which turns off the prefix cache the sizing's warm transfers rest on"),
    Managed(("--tensor-parallel-size", "-tp"), _TENSOR),
    Managed(("--pipeline-parallel-size", "-pp"), _REPLICAS),
    Managed(("--data-parallel-size", "-dp"), _REPLICAS),
    Managed(("--data-parallel-size-local", "-dpl"), _REPLICAS),
    Managed(("--prefill-context-parallel-size", "-pcp"), _REPLICAS),
    Managed(("--decode-context-parallel-size", "-dcp"), _REPLICAS),
    Managed(("--nnodes", "-n"), _REPLICAS),
    # vLLM reads more flags from the file, which nothing here can see. Only an element that is exactly
    # `--config` (FlexibleArgumentParser.parse_args: `"--config" in args`, before anything else);
    # argparse knows no `--config`, so `--config=F`, `--conf F` and a dotted `--config.x` are its
    # `--config-format`, which is no figure of the sizing's.
    Managed((CONFIG_FILE_FLAG,), "Write the flags in extraArgs instead, where they are checked",
            "which reads more flags from a file no check here can see"),
    Managed((CONTEXT_FLAG,), "Write it as a token count"),
)
_BY_OPTION = {option: m for m in MANAGED for option in m.options}


def _count(value: str) -> Optional[int]:
    """Python's int(), the type vLLM gives most integer flags: no suffix, whitespace stripped."""
    try:
        return int(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class Read:
    """A flag dynamo-lab does not manage but whose value it reads: the predictor's scheduler limits
    (infra/resolved.py, `EngineSettings`). Known here so that its spellings resolve as argparse
    resolves them (abbreviations, `_`, `=`), read with the type vLLM gives it."""

    option: str
    parse: Callable[[str], Optional[int]]  # vLLM's type for it, as ours
    rule: str  # that type in words, for the refusal
    example: int


# vLLM 0.31.0 `vllm/engine/arg_utils.py` `_compute_kwargs`: max_num_batched_tokens is among its
# `human_readable_int_args` (fields.vllm_int), max_num_seqs is a plain `int`; SchedulerConfig
# (`vllm/config/scheduler.py`) takes neither below 1 (`Field(ge=1)`).
READ = (Read("--max-num-batched-tokens", vllm_int, "a whole number, or one with a k/m/g/t (1000s, decimals "
             "allowed) or K/M/G/T (1024s) suffix (human_readable_int)", 8192),
        Read("--max-num-seqs", _count, "a whole number, with no suffix (int)", 256))
_READ = {r.option: r for r in READ}
# The shortest prefix vLLM 0.31.0's parser takes for each flag whose value dynamo-lab reads: a shorter
# one is a prefix of another option of vLLM's too (`--max-n` of --max-num-seqs and of
# --max-num-scheduled-tokens, ...), which argparse calls ambiguous, and vLLM exits. The engine tier
# checks these against every option of vLLM's, Dynamo's and Dynamo's router parser.
UNIQUE_PREFIX = {CONTEXT_FLAG: "--max-m", "--max-num-batched-tokens": "--max-num-b", "--max-num-seqs": "--max-num-se"}
# The parsers' own flags that are a prefix of a managed one: argparse takes an exact flag before any
# abbreviation, so these are themselves (`--tokenizer` is not `--tokenizer-revision`). The engine
# tier checks this against every option vLLM 0.31.0's and Dynamo 1.6.1's parsers know.
OPTIONS_WITHIN_MANAGED = ("--tokenizer", "-dc")  # -dc: --diffusion-config, not -dcp
# The parsers' two-character single-dash options (vLLM 0.31.0's; Dynamo's -h exits at once), which
# argparse takes with their value attached (`-r1`, `-r 1` as one element); checked by the engine tier.
SHORT_OPTIONS = ("-n", "-q", "-r")
# What argparse itself may match, in order: the managed flags, then those whose values are read.
_MATCHED = tuple(o for o in _BY_OPTION if o != CONFIG_FILE_FLAG) + tuple(_READ)
_KNOWN = set(_MATCHED) | set(OPTIONS_WITHIN_MANAGED) | set(SHORT_OPTIONS)
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's: a value, not a flag (3.12)


@dataclass(frozen=True)
class Given:
    """One flag of extraArgs: where, as typed, and what the parsers make of it."""

    at: int  # its index in extraArgs
    text: str  # the element as typed
    name: str  # the option string it is read as (normalized: `_` as `-`), or its own name
    flag: Optional[Managed]  # the managed flag it sets, or None
    # "" (its own name), "abbreviation", "dotted key", "spelling"; "ambiguous": a prefix of several
    # options of vLLM's, `name` the first of those known here (argparse exits)
    how: str
    value: Optional[str]  # `=value` (whitespace kept), else the next entry when it is a value; None: none

    @property
    def option(self) -> str:
        """The canonical option string it is read as (a managed flag's first), or its own name."""
        return self.flag.options[0] if self.flag is not None else self.name


def _normalized(arg: str) -> str:
    """vLLM's FlexibleArgumentParser.parse_args on one `--` element: `_` as `-` from after the `--`
    to the first `.` of the part before the first `=` (its regex `(?<=--)[^\\.]*`, once)."""
    if not arg.startswith("--"):
        return arg
    key, eq, value = arg.partition("=")
    name, dot, rest = key[2:].partition(".")
    return "--" + name.replace("_", "-") + dot + rest + eq + value


def _option(arg: str) -> tuple[Optional[str], str, Optional[str]]:
    """The option string argparse (CPython 3.12 `_parse_optional`) reads normalized `arg` as, among
    the managed ones and the parsers' flags they must be told from, how, and the value attached to
    it: (None, "", None) when it is none of those."""
    if len(arg) < 2 or arg[0] != "-" or arg == "--":  # `--`: argparse's end of the options, never one
        return None, "", None
    if arg in _KNOWN:
        return arg, "", None
    head, eq, value = arg.partition("=")
    if eq and head in _KNOWN:
        return head, "", value
    if arg[1] == "-":  # argparse's abbreviations: the part before `=` as a prefix of `--` options
        matches = _prefix_of(head)
        if not matches:
            return None, "", None
        # A managed flag among them is refused whichever argparse would pick (or none: ambiguous).
        managed = [o for o in matches if o in _BY_OPTION and o != CONTEXT_FLAG]
        read = [o for o in matches if o not in managed and head.startswith(UNIQUE_PREFIX[o])]
        return ((managed or read or matches)[0], "abbreviation" if managed or read else "ambiguous",
                value if eq else None)
    if arg[:2] in _KNOWN:  # a two-character option with its value attached: `-qfp8`
        return arg[:2], "spelling", arg[2:]
    # The whole element as a prefix of single-dash options (`-t` for `-tp`); and, wider than CPython
    # up to 3.13.0, the part before `=` (`-t=2`), on which those make vLLM exit anyway.
    matches = [o for o in _MATCHED
               if not o.startswith("--") and (o.startswith(arg) or eq and o.startswith(head))]
    return (matches[0], "abbreviation", value if eq and not matches[0].startswith(arg) else None) if matches \
        else (None, "", None)


def _prefix_of(head: str) -> list[str]:
    """The `--` options known here that `head` is a prefix of (argparse's abbreviations)."""
    return [o for o in _MATCHED if o.startswith("--") and o.startswith(head)]


def is_flag(arg: str) -> bool:
    """Whether argparse reads `arg` as a flag, not a value: a leading `-` and not `-` alone; and, as
    argparse's last two rules say, neither a negative number nor holding a space, unless it is one of
    the options above (`--block-size= 32` is --block-size, whitespace or not)."""
    arg = _normalized(arg)
    if len(arg) < 2 or arg[0] != "-":
        return False
    if _option(arg)[0] is not None:
        return True
    return not _NEGATIVE_NUMBER.match(arg) and " " not in arg


def _resolve(name: str) -> Optional[Managed]:
    option = _option(name)[0]
    return _BY_OPTION.get(option) if option is not None else None


def _dotted(arg: str) -> bool:
    """Whether FlexibleArgumentParser gathers `arg` as a dotted JSON key: a `-` first and a `.` in
    the part before its first `=`."""
    return arg.startswith("-") and "." in arg.partition("=")[0]


def read(args: list[str]) -> list[Given]:
    """Every element of `args` that vLLM 0.31.0's or Dynamo 1.6.1's parsers could read as a flag,
    each judged on its own wherever it stands (none skipped as an earlier one's value), with the
    value it would take there: attached, else the next element when that is a value."""
    found = []
    for i, typed in enumerate(args):
        if typed.startswith("-O") and typed != "-O":
            continue  # vLLM's --optimization-level, whatever follows (no managed setting)
        arg = _normalized(typed)
        following = args[i + 1] if i + 1 < len(args) else None
        if _dotted(arg):
            key, eq, explicit = arg.partition("=")
            base = key.split(".", 1)[0]
            option = _option(base)[0]
            # Without `=`, FlexibleArgumentParser takes the next element as its value, whatever it is.
            found.append(Given(i, typed, option or base, _BY_OPTION.get(option or ""), "dotted key",
                               explicit if eq else following))
            continue
        if not is_flag(typed):
            continue
        if typed == CONFIG_FILE_FLAG:
            found.append(Given(i, typed, typed, _BY_OPTION[typed], "", following))
            continue
        option, how, explicit = _option(arg)
        if option is None and "=" in arg:
            explicit = arg.partition("=")[2]  # a flag of the parsers' own, `--flag=value`
        flag = _BY_OPTION.get(option) if option is not None else None
        if option is not None and not how and typed.partition("=")[0] != arg.partition("=")[0]:
            how = "spelling"  # `_` for `-`
        if following is not None and is_flag(following):
            following = None
        found.append(Given(i, typed, option or arg.partition("=")[0], flag, how,
                           explicit if explicit is not None else following))
    return found


def _shown(text: str, upto: Optional[int] = None) -> str:
    """An element as typed up to its option's name: never the value, which may be a token."""
    if upto is None:
        upto = min([len(text)] + [text.index(c) for c in "= \t\n" if c in text])
    rest = text[upto:]
    return text[:upto] + ("" if not rest else "=..." if rest.startswith("=") else "...")


_READ_AS = {"": "", "spelling": ", which vLLM reads as {},",
            "abbreviation": ", a prefix vLLM's parser takes for {} (argparse abbreviations),",
            "dotted key": ", a dotted key that vLLM turns into a whole {} JSON,"}


def refusal(given: Given) -> Optional[str]:
    """Why `given` may not be in extraArgs, or None. Only the context length is the group's to set;
    the values dynamo-lab reads must be read as vLLM reads them."""
    flag, option = given.flag, given.option
    if given.how == "ambiguous":
        head = _normalized(given.text).partition("=")[0]
        return (f"{_shown(given.text)!r} is a prefix of {', '.join(_prefix_of(head))} and of other flags of "
                f"vLLM's, which argparse finds ambiguous: the worker would exit. Write the flag in full")
    read_as = _READ_AS[given.how].format(option)
    if flag is not None and option != CONTEXT_FLAG:
        # Never the value: it may be a token (`--hf-token=hf_...`, `-q` + value attached).
        attached = given.name in SHORT_OPTIONS and given.text[:2] == given.name and given.text[2:3] not in ("", "=")
        return f"{_shown(given.text, 2 if attached else None)!r}{read_as} sets {option}, {flag.why}. {flag.fix}"
    if option != CONTEXT_FLAG and option not in _READ:
        return None
    # A context or a limit: its value is shown (neither is a secret).
    if given.how == "dotted key" and option == CONTEXT_FLAG:
        return (f"{_shown(given.text)!r}{read_as} is not a token count. Write {CONTEXT_FLAG} N (e.g. {CONTEXT_FLAG} "
                "8192), or remove it to use workload.maxModelLen")
    if " " in given.text:  # argparse's test for a value (`_parse_optional`): a space, not a tab
        return (f"{given.text!r} holds a space, so Dynamo's parser, which reads the flags first, takes it for the "
                f"value of a flag of its own before it: whether vLLM reads it as {option} depends on its place. "
                f"Write it without the space ({option}=N), or as two elements")
    if option == CONTEXT_FLAG:
        return None  # a token count or not: config.checks judges the last one, as vLLM takes it
    read = _READ[option]
    value = None if given.how == "dotted key" else given.value
    if value is None or (n := read.parse(value)) is None or n < 1:
        gives = ("a JSON object" if given.how == "dotted key"
                 else "no value" if value is None else repr(value))
        return (f"{_shown(given.text)!r}{read_as} gives {option} {gives}: vLLM reads {option} as {read.rule}, at "
                f"least 1, and the worker would exit on any other. Write a count (e.g. {option} {read.example}), or "
                "remove it for vLLM's default")
    return None


def _placed(args: list[str], given: Given) -> Optional[str]:
    """Why `given`, which could be a flag, is read by one parser or another depending on what stands
    around it, or None: a dotted key without `=` before a flag, or before nothing (vLLM 0.31.0
    FlexibleArgumentParser.parse_args takes `processed_args[i + 1]` as its value, whatever it is)."""
    if given.how != "dotted key" or "=" in args[given.at] or (
            given.at + 1 < len(args) and not is_flag(args[given.at + 1])):
        return None
    typed = _shown(given.text)
    following = (f"here the flag {_shown(args[given.at + 1])!r}" if given.at + 1 < len(args)
                 else "and there is none (vLLM fails at start)")
    if _NEGATIVE_NUMBER.match(given.text):
        return (f"{typed!r} is a negative decimal, which vLLM's FlexibleArgumentParser reads as a dotted JSON key (a "
                f"leading '-' and a '.') that takes the next element as its value whatever it is, {following}, "
                f"while Dynamo's parser reads it as a number: what that flag sets depends on which parser reads "
                f"{typed!r}. Attach the number to its flag with '=' (--flag={typed})")
    return (f"{typed!r} is a dotted JSON key without '=', so vLLM's FlexibleArgumentParser takes the next element "
            f"as its value whatever it is, {following}. Write the value after '=' ({typed}=VALUE)")


def _secret_word(word: str) -> bool:
    flag = _resolve(_normalized(word).partition("=")[0].split(".", 1)[0])
    return flag is not None and flag.secret


def mask_text(text: str) -> str:
    """`text` with whatever follows a secret flag's name (`--hf-tok hf_...`, any spelling) as `...`."""
    for match in re.finditer(r"\S+", text):
        word = match.group()
        if _secret_word(word):
            end = match.start() + len(word.partition("=")[0])
            return text[:end] + ("=..." if "=" in word else " ..." if text[end:].strip() else "")
    return text


def mask(args: list[Any]) -> list[Any]:
    """`args` as they may be printed: a secret flag's value, attached or the next element, as `...`."""
    out: list[Any] = []
    secret_next = False
    for arg in args:
        if secret_next and not (isinstance(arg, str) and is_flag(arg)):
            out.append("...")
        else:
            out.append(mask_value(arg))
        secret_next = isinstance(arg, str) and _secret_word(arg) and "=" not in arg and " " not in arg.strip()
    return out


def mask_value(value: Any) -> Any:
    """Any value given as extraArgs (a list, or what is not one) as it may be printed: `mask` on a
    list, `mask_text` on a string, either on what a map holds."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, list):
        return mask(value)
    if isinstance(value, dict):
        return {k: mask_value(v) for k, v in value.items()}
    return value


def one_element(arg: str) -> Optional[str]:
    """Why `arg`, a flag and its value typed as one element (`--max-model-len 100`), makes vLLM exit,
    or None: argparse reads it as a stray value (it holds a space and is no option above)."""
    flag = arg.split("=", 1)[0]
    if not arg.startswith("-") or len(flag.split()) < 2 or is_flag(arg) and _option(_normalized(arg))[0]:
        return None
    name, value = flag.split(None, 1)
    if _secret_word(name):  # never shown: it may be the Hub token
        value, arg = "...", f"{name} ..."
    arg, value = mask_text(arg), mask_text(value)  # nor a secret flag's value further on
    # A `.` before the space: FlexibleArgumentParser takes it for a dotted key named with the space.
    read_as = ("a dotted key whose name holds the space, not the flag and its value" if _dotted(_normalized(flag))
               else "a single unknown argument and exit")
    return (f"{arg!r} is one element, so vLLM would read it as {read_as}. "
            f"Write the flag and its value as two elements ({name!r}, {value!r}), or as {name}={value}")


def check(args: list[str]) -> Optional[str]:
    """The first reason `args` may not be a group's extraArgs, or None: each element that would set
    a managed setting wherever it stood (or a value dynamo-lab reads, unreadable), then a flag and
    its value typed as one element, then each element whose reading depends on its place."""
    given = read(args)
    for g in given:
        if (why := refusal(g)) is not None:
            return why
    for arg in args:
        if (why := one_element(arg)) is not None:
            return why
    for g in given:
        if (why := _placed(args, g)) is not None:
            return why
    if "--" in args:
        return ("'--' makes argparse read every element after it as a positional argument, and dynamo.vllm "
                "takes none: the worker would exit. Remove it")
    return None


def value(args: list[str], flag: str) -> Optional[str]:
    """The value vLLM takes for `flag` (managed, or one of READ) from `args`: the last one given in
    any spelling ("" when the last has none); None when it is not given. Exact for what `check`
    takes: nothing before such a flag can change how it is read."""
    values = [g.value or "" for g in read(args) if g.how != "ambiguous" and g.option == flag]
    return values[-1] if values else None


def count(args: list[str], flag: str) -> Optional[int]:
    """The count vLLM runs with for `flag`, one of READ, from `args`: `value`, read with vLLM's type
    for that flag; None when it is not given. ValueError for one vLLM would not run with, which
    `check` refuses (the stack file's extraArgs never hold one)."""
    text = value(args, flag)
    if text is None:
        return None
    n = _READ[flag].parse(text)
    if n is None or n < 1:
        raise ValueError(f"{flag} {text!r} is not a count vLLM reads ({_READ[flag].rule}, at least 1)")
    return n
