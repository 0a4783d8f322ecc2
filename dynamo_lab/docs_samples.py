"""The samples README.md and docs/ show, made by the commands that print them: `python3 dev.py docs-samples`.

A sample is marked by an HTML comment on the line right above it, naming the command that prints it:

    <!-- sample: dynamo-lab sizing cross-server -->
    ```text
    (what the command prints)
    ```

The sample is the fenced block under the marker (its fence and indentation kept), or, where the
line under the marker starts a Markdown table, the table's lines (a command that prints a table),
or, where a `<!-- /sample -->` line closes it, everything up to that line (Markdown of several blocks).
Adding a sample is adding its marker line: `docs-samples` fills the block in. A marker may name
several commands, one a line; the block is their outputs one after another:

    <!-- sample:
    dynamo-lab sizing cross-server; with modelCache.hostPath=hf-cache; exit 2
    dynamo-lab sizing kv-routing; with modelCache.mode=pvc modelCache.pvc.size=1Gi; exit 2
    -->

A command is `dynamo-lab ARGS` (run in this process, in the project's directory, as
tests/helpers.run_cli runs it) or `python -m dynamo_lab.MODULE ARGS` (the module's `main`). After it,
`;`-separated clauses:
- `with KEY=VALUE ...`: the command runs in a copy of the project whose stack file (the stack the
  command names) has KEY set to VALUE, as `pulumi config set --path KEY VALUE` sets it: KEY is a
  path under `dynamo-lab:` (`workers[0].memoryLimit`) unless it has its own namespace
  (`kubernetes:context`), VALUE is read as YAML (`1Gi` text, `true` a bool, `{a: 1}` a map);
- `exit N`: the exit code it must end with (default 0); a command that ends otherwise writes
  nothing, so a traceback or a refusal never becomes a sample by mistake.
The sample is what the command printed on stdout, or on stderr where stdout is empty (a refusal).

The fast tier compares every sample whose command is cheap (tests/test_docs_samples.py); those that
run the predictor's full estimate (SLOW) are compared by the slow tier. Either names the page, the
line and this module's command when a sample differs. docs/configuration.md's reference tables are
generated too (config_reference.py); `docs-samples` rewrites them with the rest.
"""

from __future__ import annotations

import importlib
import io
import os
import re
import shlex
import shutil
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import yaml

from dynamo_lab import config_reference, stack_files
from dynamo_lab.paths import ROOT
from infra.config import PROJECT
from infra.errors import UserError

COMMAND = "python3 dev.py docs-samples"
MARKER = re.compile(r"^(?P<indent>[ \t]*)<!-- sample:(?P<body>.*?)-->[ \t]*\n", re.S | re.M)
END = "<!-- /sample -->"
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+)[a-z]*[ \t]*$")
# Commands whose samples run the predictor's full estimate (15 simulated runs per point and layout,
# tens of seconds to minutes on 2 cores): the slow tier compares them, the fast tier does not.
SLOW = (("dynamo-lab", "advise"), ("dynamo-lab", "predict"), ("python", "-m", "dynamo_lab.advise.crossover"),
        ("python", "-m", "dynamo_lab.predict.peer"))
# The pages that hold samples: the README and every page of docs/.
PAGE_GLOBS = ("README.md", "docs/*.md")


class SampleError(UserError):
    pass


@dataclass(frozen=True)
class Command:
    """One command of a marker: its words, the stack-file edits it runs with, the exit code it must end with."""

    argv: tuple[str, ...]
    edits: tuple[tuple[str, Any], ...] = ()
    exit_code: int = 0
    text: str = ""

    @property
    def slow(self) -> bool:
        return any(self.argv[:len(prefix)] == prefix for prefix in SLOW)


@dataclass
class Sample:
    """A marked sample: where it is (page relative to the root, the marker's 1-based line), the
    commands that make it, and the span of the page's text that holds it."""

    page: str
    line: int
    commands: tuple[Command, ...]
    start: int  # offset of the sample's first line in the page's text
    end: int  # offset just past its last line
    indent: str
    shown: str = field(repr=False)  # the sample as the page has it, indentation removed

    @property
    def slow(self) -> bool:
        return any(c.slow for c in self.commands)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def describe(self) -> str:
        return "; ".join(c.text for c in self.commands)


def _command(text: str, where: str) -> Command:
    clauses = [c.strip() for c in text.split(";")]
    try:
        argv = tuple(shlex.split(clauses[0]))
    except ValueError as exc:
        raise SampleError(f"{where}: sample command `{clauses[0]}` does not parse as a shell command line "
                          f"({exc})") from None
    if argv[:1] != ("dynamo-lab",) and not (argv[:2] == ("python", "-m") and len(argv) > 2
                                             and argv[2].startswith("dynamo_lab.")):
        raise SampleError(f"{where}: sample command `{clauses[0]}` is neither `dynamo-lab ARGS` nor "
                          "`python -m dynamo_lab.MODULE ARGS`: write the command that prints the sample")
    edits: list[tuple[str, Any]] = []
    code = 0
    for clause in clauses[1:]:
        word, _, rest = clause.partition(" ")
        if word == "with" and rest.strip():
            for pair in shlex.split(rest):
                key, eq, value = pair.partition("=")
                if not eq or not key:
                    raise SampleError(f"{where}: `with {rest}`: write each edit as KEY=VALUE (workers[0].replicas=2)")
                edits.append((key, yaml.safe_load(value)))
        elif word == "exit" and rest.strip().isdigit():
            code = int(rest)
        else:
            raise SampleError(f"{where}: `{clause}` after the sample command is not `with KEY=VALUE ...` or "
                              "`exit N`")
    return Command(argv, tuple(edits), code, text.strip())


def _sample_span(text: str, offset: int, where: str) -> tuple[int, int, str, str]:
    """The sample under a marker that ends at `offset`: (start, end, indentation, the sample as
    shown without its indentation). A fenced block's inside, or a Markdown table's lines."""
    end_mark, next_marker = text.find(END, offset), MARKER.search(text, offset)
    if end_mark >= 0 and (next_marker is None or end_mark < next_marker.start()):
        if text[end_mark - 1:end_mark] not in ("\n", ""):
            raise SampleError(f"{where}: put `{END}` on a line of its own")
        return offset, end_mark, "", text[offset:end_mark]
    lines = text[offset:].splitlines(keepends=True)
    if not lines:
        raise SampleError(f"{where}: a sample marker with nothing under it: put a fenced block (```text) or a "
                          "table right under the marker")
    fence = FENCE.match(lines[0].rstrip("\n"))
    if fence:
        indent, ticks = fence.group("indent"), fence.group("fence")
        start = offset + len(lines[0])
        pos = start
        for line in lines[1:]:
            if line.rstrip("\n").strip() == ticks:
                body = text[start:pos]
                return start, pos, indent, "".join(ln[len(indent):] if ln.startswith(indent) else ln.lstrip()
                                                   for ln in body.splitlines(keepends=True))
            pos += len(line)
        raise SampleError(f"{where}: the sample's fenced block is never closed")
    if lines[0].lstrip().startswith("|"):
        indent = lines[0][:len(lines[0]) - len(lines[0].lstrip())]
        end = offset
        for line in lines:
            if not line.lstrip().startswith("|"):
                break
            end += len(line)
        return offset, end, indent, "".join(ln[len(indent):] for ln in text[offset:end].splitlines(keepends=True))
    raise SampleError(f"{where}: the line under a sample marker is neither a fence (```text) nor a table (|): "
                      "put the sample right under its marker")


def samples(text: str, page: str) -> list[Sample]:
    """Every marked sample of a page's text."""
    found = []
    for m in MARKER.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        where = f"{page}:{line}"
        commands = tuple(_command(c, where) for c in m.group("body").strip().splitlines() if c.strip())
        if not commands:
            raise SampleError(f"{where}: a sample marker names no command: <!-- sample: dynamo-lab ... -->")
        start, end, indent, shown = _sample_span(text, m.end(), where)
        found.append(Sample(page, line, commands, start, end, indent, shown))
    return found


def pages(root: Path = ROOT) -> list[Path]:
    return [p for pattern in PAGE_GLOBS for p in sorted(root.glob(pattern))]


def all_samples(root: Path = ROOT) -> list[Sample]:
    return [s for p in pages(root) for s in samples(p.read_text(), str(p.relative_to(root)))]


# --- Running a sample's commands ------------------------------------------------------------------

Main = Callable[[list[str]], int]


def set_path(config: dict[str, Any], key: str, value: Any) -> None:
    """`pulumi config set --path KEY VALUE` on a stack file's `config:` map."""
    first, *rest = re.findall(r"[^.\[\]]+|\[\d+\]", key if ":" in key.split(".")[0] else f"{PROJECT}:{key}")
    parts: list[Any] = [first] + [int(p[1:-1]) if p.startswith("[") else p for p in rest]
    node: Any = config
    for part, after in zip(parts, parts[1:], strict=False):
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise SampleError(f"`{key}`: no item {part} there")
        elif not isinstance(node, dict):
            raise SampleError(f"`{key}`: {part} is not under a map")
        child = node[part] if (isinstance(part, int) or part in node) else None
        if child is None:
            child = [] if isinstance(after, int) else {}
            node[part] = child
        node = child
    last = parts[-1]
    if isinstance(last, int) and not (isinstance(node, list) and last <= len(node)):
        raise SampleError(f"`{key}`: no item {last} there")
    if isinstance(last, int) and last == len(node):
        node.append(value)
    else:
        node[last] = value


def _edited_project(root: Path, stack: str, edits: tuple[tuple[str, Any], ...], into: Path) -> Path:
    """A copy of the project in `into` (Pulumi.yaml, every stack file, tests/ linked for saved
    cluster data) with `edits` made to stack `stack`'s file."""
    for f in [root / "Pulumi.yaml", *root.glob("Pulumi.*.yaml")]:
        shutil.copy(f, into / f.name)
    (into / "tests").symlink_to(root / "tests")
    path = into / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise SampleError(f"`with` edits stack {stack}, which has no stack file Pulumi.{stack}.yaml")
    doc = stack_files.read_yaml(path)
    for key, value in edits:
        set_path(doc.setdefault("config", {}), key, value)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return into


def _stack_of(argv: tuple[str, ...], main_parser) -> str:
    """The stack a `dynamo-lab` command names (its `stack` argument)."""
    args = main_parser().parse_args(list(argv[1:]))
    stack = getattr(args, "stack", None)
    if not stack:
        raise SampleError(f"`{shlex.join(argv)}` names no stack for `with` to edit")
    return stack


def run(command: Command, main: Main, main_parser, root: Path = ROOT) -> str:
    """What `command` prints (stdout, else stderr), run in this process; SampleError when it does not
    end with its exit code."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="docs-sample-") as tmp:
        cwd = root
        if command.edits:
            cwd = _edited_project(root, _stack_of(command.argv, main_parser), command.edits, Path(tmp))
        os.chdir(cwd)
        try:
            with redirect_stdout(out), redirect_stderr(err):
                try:
                    if command.argv[0] == "dynamo-lab":
                        code = main(list(command.argv[1:]))
                    else:
                        code = importlib.import_module(command.argv[2]).main(list(command.argv[3:]))
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 1
        finally:
            os.chdir(here)
    if code != command.exit_code:
        raise SampleError(f"`{command.text}` exited {code}, not {command.exit_code}: nothing written; what it "
                          f"said: {(err.getvalue() or out.getvalue()).strip()[-2000:]}")
    return out.getvalue() or err.getvalue()


def output(sample: Sample, main: Main, main_parser, root: Path = ROOT) -> str:
    """The sample as its commands print it now (without indentation, ending in a newline)."""
    return "".join(run(c, main, main_parser, root).rstrip("\n") + "\n" for c in sample.commands)


def stale_message(sample: Sample) -> str:
    return (f"{sample.where}: the sample `{sample.describe()}` prints is not what the page shows: run "
            f"`{COMMAND} {sample.page}` and review the diff")


def _indented(text: str, indent: str) -> str:
    return "".join(indent + line if line.strip() else line for line in text.splitlines(keepends=True))


def regenerate(main: Main, main_parser, root: Path = ROOT, only: Optional[list[str]] = None,
               slow: bool = True, log: Callable[[str], None] = lambda m: None) -> Iterator[tuple[Sample, bool]]:
    """Rewrite each page's samples in place (the pages `only` names, else every page; without the
    slow ones unless `slow`); yields each sample with whether it changed. A page is written once,
    after every sample of it was made, so a failing command leaves it as it was."""
    chosen = pages(root) if not only else [root / p for p in only]
    for path in chosen:
        if not path.is_file():
            raise SampleError(f"{path}: no such page (name README.md or docs/PAGE.md)")
        rel = str(path.relative_to(root))
        text = path.read_text()
        new, last, results = [], 0, []
        for s in samples(text, rel):
            if s.slow and not slow:
                log(f"{s.where}: skipped (runs the predictor: {s.describe()})")
                continue
            log(f"{s.where}: {s.describe()}")
            made = output(s, main, main_parser, root)
            new += [text[last:s.start], _indented(made, s.indent)]
            last = s.end
            results.append((s, made != s.shown))
        new.append(text[last:])
        updated = "".join(new)
        if updated != text:
            path.write_text(updated)
        yield from results
    reference = config_reference.PAGE.relative_to(config_reference.ROOT)
    if (not only or str(reference) in only) and (root / reference).is_file():
        if config_reference.write(root / reference):
            log(f"{reference}: configuration reference rewritten")


def stale(main: Main, main_parser, root: Path = ROOT, only: Optional[list[str]] = None, slow: bool = True,
          log: Callable[[str], None] = lambda m: None) -> list[Sample]:
    """The samples (of the pages `only` names, else every page) that differ from what their commands
    print now; nothing is written."""
    chosen = [s for s in all_samples(root) if (not only or s.page in only) and (slow or not s.slow)]
    out = []
    for s in chosen:
        log(f"{s.where}: {s.describe()}")
        if output(s, main, main_parser, root) != s.shown:
            out.append(s)
    return out
