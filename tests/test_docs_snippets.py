"""Every snippet README.md and docs/ give a user to copy runs as written: each `python3 dev.py` and
`dynamo-lab` command (in ```sh blocks and in code spans) is one the command line takes, naming
files that exist; each `pulumi config set --path` gives a stack file that still loads; each stack-file
snippet (```yaml) loads into the stack it is written for."""

from __future__ import annotations

import re
import shlex
from functools import cache

import pytest
import yaml

from dev import LAB_COMMANDS, OWN_COMMANDS
from dynamo_lab import cli, docs_samples, stack_files
from infra.errors import ConfigError
from infra.plan import load_stack
from tests.helpers import ROOT, STACKS, script_commands

FENCE = re.compile(r"^([ \t]*)```([a-z]*)\n(.*?)^\1```", re.S | re.M)
OPERATORS = {"&&", "||", "|", ";", "&", "(", ")", "$(", "`"}
# Words a page writes for the user to fill in: a stack name, a file, a ref (all capitals or <...>).
PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z_]*|<[^>]+>|Pulumi\.[A-Z]+\.yaml)$")


def _pages() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), p.read_text()) for p in docs_samples.pages()]


def _segments(line: str) -> list[list[str]]:
    """A command line's simple commands, split at the shell's operators, comments left out."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()`$")
    lexer.whitespace_split, lexer.commenters = True, "#"
    out: list[list[str]] = [[]]
    for token in lexer:
        if token in OPERATORS or set(token) <= set(";&|()`$"):
            out.append([])
        else:
            out[-1].append(token)
    return [words for words in out if words]


@cache
def _snippets() -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """(page, where, words) of every simple command in a ```sh block or a code span of the pages."""
    found = []
    for page, text in _pages():
        lines = [ln for m in FENCE.finditer(text) if m.group(2) == "sh" for ln in script_commands(m.group(3))]
        prose = FENCE.sub("", text)
        lines += [span for span in re.findall(r"`([^`\n]+)`", prose)
                  if span.startswith(("python3 dev.py ", "dynamo-lab ", "pulumi config set "))]
        for line in lines:
            try:
                segments = _segments(line)
            except ValueError:
                continue  # not a shell line (an unclosed quote in prose): nothing a user runs
            found += [(page, line, tuple(words)) for words in segments]
    return tuple(found)


def _lab(words: tuple[str, ...]) -> list[str] | None:
    """The dynamo-lab arguments of a `python3 dev.py LAB_COMMAND ...` or `dynamo-lab ...` command."""
    if words[:2] == ("python3", "dev.py") and len(words) > 2 and words[2] in LAB_COMMANDS:
        return list(words[2:])
    if words[:1] == ("dynamo-lab",):
        return list(words[1:])
    return None


def test_the_pages_give_commands_to_copy():
    lab = [w for _, _, w in _snippets() if _lab(w) is not None]
    assert len(lab) >= 40 and any(w[:3] == ("python3", "dev.py", "advise") for w in lab)


def _pattern(words) -> bool:
    """A command written as a pattern for the reader (`dynamo-lab COMMAND ...`, `--flows N`), not one to paste."""
    return any(PLACEHOLDER.match(w) or w == "..." for w in words)


def _saved_by_the_docs() -> set[str]:
    """Files a page's own command writes (`... > cluster.json`): a later command may read them."""
    return {m for _, text in _pages() for m in re.findall(r"> ?([\w.-]+\.json)\b", text)}


def test_every_dev_py_command_shown_is_one_dev_py_takes():
    shown = {w[2] for _, _, w in _snippets() if w[:2] == ("python3", "dev.py") and len(w) > 2 and not _pattern(w[2:3])}
    assert shown and sorted(shown - set(OWN_COMMANDS) - set(LAB_COMMANDS) - {"--help"}) == []


def test_every_lab_command_shown_parses_and_names_files_that_exist():
    refused, saved = [], _saved_by_the_docs()
    assert "cluster.json" in saved
    for page, line, words in _snippets():
        args = _lab(words)
        if args is None or _pattern(args):
            continue
        if args[:1] == ["local-cluster"]:
            ok = len(args) > 1 and args[1] in ("up", "down", "status")
            why = "" if ok else "dynamo-lab local-cluster takes up, down or status"
        else:
            try:
                parsed = cli.parser().parse_args(args)
            except SystemExit:
                refused.append(f"{page}: `{line}`: the command line refuses {shlex.join(args)}")
                continue
            source = getattr(parsed, "source", None)
            ok = source in (None, "-") or source in saved or (ROOT / source).is_file()
            why = "" if ok else f"--from {source}: no such file"
        if not ok:
            refused.append(f"{page}: `{line}`: {why}")
    assert refused == []


def _pulumi_value(text: str):
    """A value as `pulumi config set --path` stores it: true and false booleans, integers numbers,
    everything else a string (pulumi config set, --path)."""
    if text in ("true", "false"):
        return text == "true"
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def _config_sets() -> list[tuple[str, str, str, str, str]]:
    """(page, line, stack, key, value) of every `pulumi config set --path KEY VALUE --stack S` shown."""
    out = []
    for page, line, words in _snippets():
        if words[:3] != ("pulumi", "config", "set") or "--path" not in words or "--secret" in words:
            continue
        rest = [w for w in words[3:] if w != "--path"]
        stack = rest[rest.index("--stack") + 1] if "--stack" in rest else None
        key, value = [w for i, w in enumerate(rest) if w != "--stack" and (i == 0 or rest[i - 1] != "--stack")][:2]
        out.append((page, line, stack, key, value))
    return out


def test_every_pulumi_config_set_shown_leaves_a_stack_file_that_loads():
    sets = _config_sets()
    assert len(sets) >= 3
    refused = []
    for page, line, stack, key, value in sets:
        if stack not in STACKS or PLACEHOLDER.match(value) or PLACEHOLDER.match(key):
            continue
        doc = stack_files.stack_doc(stack)
        docs_samples.set_path(doc, key, _pulumi_value(value))
        try:
            load_stack(stack, *stack_files.config_from_doc(doc))
        except ConfigError as exc:
            refused.append(f"{page}: `{line}`: {exc}")
    assert refused == []


# --- Stack-file snippets ---------------------------------------------------------------------------


def _yaml_snippets() -> list[tuple[str, int, dict]]:
    out = []
    for page, text in _pages():
        for m in FENCE.finditer(text):
            if m.group(2) == "yaml":
                out.append((page, text.count("\n", 0, m.start()) + 1, yaml.safe_load(m.group(3))))
    return out


SNIPPETS = _yaml_snippets()


def _with_snippet(stack: str, snippet: dict) -> dict:
    """The stack file's config with the snippet's keys in it, as a user pastes them: a map merged
    key by key into the stack's own (a class or a setting added beside the others), anything else
    replaced; workers on classes the snippet replaces move to its first class."""
    doc = stack_files.stack_doc(stack)
    for key, value in snippet.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict) and key != "dynamo-lab:gpuClasses":
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    classes = snippet.get("dynamo-lab:gpuClasses")
    if classes:
        first = next(iter(classes))
        for w in doc["dynamo-lab:workers"]:
            if w.get("gpuClass", "gpu-24gb") not in classes:
                w["gpuClass"] = first
    return doc


def test_the_pages_show_stack_file_snippets():
    assert len(SNIPPETS) >= 5 and all(isinstance(s, dict) and all(":" in k for k in s) for _, _, s in SNIPPETS)


@pytest.mark.parametrize(("page", "line", "snippet"), SNIPPETS, ids=[f"{p}:{n}" for p, n, _ in SNIPPETS])
def test_a_stack_file_snippet_loads_into_a_shipped_stack(page, line, snippet):
    # Into the first shipped stack it is written for: a probe's groups are cross-server's, a class
    # of 80GB GPUs two-node-rdma's; one that loads into none is a snippet a user cannot use.
    errors = []
    for stack in STACKS:
        try:
            load_stack(stack, *stack_files.config_from_doc(_with_snippet(stack, snippet)))
            return
        except ConfigError as exc:
            errors.append(str(exc))
    pytest.fail(f"{page}:{line}: the snippet loads into no shipped stack:\n" + "\n".join(errors))
