"""Review without a cluster: golden renders, and `diff` between a git ref and the working tree."""

from __future__ import annotations

import difflib
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Optional

import yaml

from dynamo_lab import mockrun, render, stack_files
from infra import catalogue
from infra.errors import UserError, stack_file

GOLDEN_DIR = Path("tests") / "golden"


class ReviewError(UserError):
    pass


# Goldens of every stack with every optional part on (the probe where there is a KV transfer, the
# benchmark, NetworkPolicies, a token Secret), in each model cache mode: a change to any builder
# shows in a pull request's golden diff, not only a change to what the shipped stacks use.
VARIANTS = {"everything-on": "nodeVolume", "everything-on-hostpath": "hostPath", "everything-on-pvc": "pvc",
            "everything-on-off": "off"}


def _everything_on(stack: str, root: Optional[Path], cache_mode: str) -> tuple[dict[str, str], list[str]]:
    raw, secrets = stack_files.stack_config(stack, root)
    config = {k: json.loads(v) if v[:1] in "[{" else v for k, v in raw.items() if k not in secrets}
    project = stack_files.PROJECT + ":"
    graph = {**config.get(project + "graph", {}), "networkPolicy": True}
    config.update({project + "benchmark": {"enabled": True}, project + "graph": graph,
                   project + "modelCache": {**config.get(project + "modelCache", {}), "mode": cache_mode},
                   project + "hfToken": {"secure": "not-a-token"}})
    workers = config.get(project + "workers", [])
    # The probe measures the TCP path (infra.validate.topology refuses it where the KV moves over RDMA).
    if any(w.get("role") == "prefill" and (w.get("kvTransfer") or {}).get("transport", "tcp") == "tcp"
           for w in workers):
        config[project + "probe"] = {"enabled": True}
    return stack_files.config_from_doc(config)


# Each run and render this process made, by what it was made from: the stack's name and its config as
# the Pulumi CLI hands it over (rendered). The code is the running code, the same for every entry.
_RUNS: dict[tuple[str, str, tuple[str, ...]], mockrun.Run] = {}
_RENDERED: dict[tuple[str, str, tuple[str, ...]], str] = {}


def _key(stack: str, root: Optional[Path], variant: Optional[str]) -> tuple[str, str, tuple[str, ...]]:
    raw, secrets = (stack_files.stack_config(stack, root) if variant is None
                    else _everything_on(stack, root, VARIANTS[variant]))
    return stack, json.dumps(raw, sort_keys=True), tuple(sorted(secrets))


def rendered(stack: str, root: Optional[Path] = None, variant: Optional[str] = None) -> mockrun.Run:
    """The program's run of the stack (with a variant's settings) under mocks, by the running code.

    A config run before in this process is not run again: the run is a function of the stack's name
    and config alone (mockrun.run), so `diff` renders a stack file the base and the working tree
    have alike once, not twice, and `golden` and the tests reuse what they made (the run is shared:
    read it, do not change it)."""
    key = _key(stack, root, variant)
    if key not in _RUNS:
        _RUNS[key] = mockrun.run(stack, json.loads(key[1]), list(key[2]))
    return _RUNS[key]


def render_yaml(stack: str, root: Optional[Path] = None, variant: Optional[str] = None) -> str:
    """The stack's manifests (with a variant's settings) as `render` prints them (rendered)."""
    key = _key(stack, root, variant)
    if key not in _RENDERED:
        _RENDERED[key] = render.to_yaml(rendered(stack, root, variant))
    return _RENDERED[key]


def golden_path(root: Path, stack: str, variant: Optional[str] = None) -> Path:
    return root / GOLDEN_DIR / (f"{stack}.yaml" if variant is None else f"{stack}.{variant}.yaml")


def write_golden(root: Path, stacks: Optional[list[str]] = None) -> list[tuple[Path, bool]]:
    """`dynamo-lab golden`: re-render tests/golden/<stack>[.<variant>].yaml for the shipped stacks and
    the examples (or those named); each path with whether its text changed (an unchanged file is not written)."""
    out = []
    (root / GOLDEN_DIR).mkdir(parents=True, exist_ok=True)
    for stack in stacks or (*catalogue.SHIPPED_STACKS, *catalogue.EXAMPLE_STACKS):
        for variant in (None, *VARIANTS):
            path = golden_path(root, stack, variant)
            text = render_yaml(stack, root, variant)
            changed = not path.is_file() or path.read_text() != text
            if changed:
                path.write_text(text)
            out.append((path, changed))
    return out


def _git(root: Path, *args: str, binary: bool = False):
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, check=False)
    if proc.returncode != 0:
        raise ReviewError(f"git {' '.join(args)}: {proc.stderr.decode().strip()}")
    return proc.stdout if binary else proc.stdout.decode().strip()


def default_base(root: Path) -> str:
    """The merge base with the main branch (origin/main when it exists, else main)."""
    for ref in ("origin/main", "main"):
        try:
            return _git(root, "merge-base", "HEAD", ref)
        except ReviewError:
            continue
    raise ReviewError("no main branch to compare with; pass --base REF")


CODE = ("infra", "dynamo_lab")  # the program's package and the toolbox's


def _code_digest(tree: Path) -> str:
    """The sha256 of a tree's program and tools (every file under infra/ and dynamo_lab/ but
    bytecode), by path."""
    digest = hashlib.sha256()
    for path in sorted(p for package in CODE for p in (tree / package).rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(tree).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _running_code_is(tree: Path) -> bool:
    """Whether `tree` holds the code that is running: this checkout, or a tree whose infra/ and dynamo_lab/ are the
    same file for file (a ref that changed only stack files), which renders here exactly as it
    would in a process of its own, in a fraction of the time."""
    import infra

    running = Path(infra.__file__).resolve().parent
    if running.parent == tree.resolve():
        return True
    return (tree / "infra").is_dir() and _code_digest(tree) == _code_digest(running.parent)


def _render_tree(tree: Path, stacks: list[str]) -> tuple[dict[str, Optional[str]], dict[str, list[str]], set[str]]:
    """Render stacks with the code and stack files in `tree` (the working tree, or a git ref's):
    each stack's manifests (None where the tree has no file of it), each stack the tree's code
    refuses, with its refusal's lines (as `render` words them, its own prefix taken off), and those
    of them where the tree's code failed otherwise (a traceback: nothing said of the stack file).

    The tree whose code is running (or the same code) renders in this process. Any other tree renders in
    processes of its own, with its own code, all stacks at once, through the entry that tree has:
    `python -m dynamo_lab render STACK`; `python -m infra.lab render STACK` in refs from before the
    toolbox became a package of its own, `python -m infra render STACK` in refs from before the lab's
    command line had a package entry of its own."""
    present = [s for s in stacks if (tree / f"Pulumi.{s}.yaml").is_file()]
    out: dict[str, Optional[str]] = {s: None for s in stacks}
    refused: dict[str, list[str]] = {}
    failed: set[str] = set()
    if _running_code_is(tree):
        for stack in present:
            try:
                out[stack] = render_yaml(stack, tree)
            except UserError as exc:
                refused[stack] = str(exc).split("\n")
        return out, refused, failed
    entry = ("dynamo_lab" if (tree / "dynamo_lab" / "__main__.py").is_file()
             else "infra.lab" if (tree / "infra" / "lab" / "__main__.py").is_file() else "infra")
    procs = {stack: subprocess.Popen([sys.executable, "-m", entry, "render", "--", stack], cwd=tree,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for stack in present}
    for stack, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        if proc.returncode == 0:
            out[stack] = stdout
        elif proc.returncode == 2:  # a refusal (a UserError), one line a problem
            refused[stack] = [_CHILD_PREFIX.sub("", line) for line in stderr.strip().split("\n")]
        else:  # the ref's code failed otherwise (a traceback): its last line says how
            last = (stderr.strip().split("\n") or [""])[-1]
            refused[stack] = [f"`python -m {entry} render {stack}` (the ref's own code) failed with exit "
                              f"{proc.returncode}: {last}"]
            failed.add(stack)
    return out, refused, failed


# How a ref's `render` begins each line of a refusal: `error: dynamo-lab render: ` (the one style of
# dynamo_lab/cli.py), `error: ` in refs from before it, nothing before a ConfigError's lines then.
# Taken off, so the line diff prints has its own prefix only.
_CHILD_PREFIX = re.compile(r"^error: (?:dynamo-lab render: )?")


def _naming_the_file(stack: str, ref: Optional[str], lines: list[str]) -> list[str]:
    """A refusal's lines, each beginning with the stack's file (`Pulumi.STACK.yaml: `, as every
    command names it; `Pulumi.STACK.yaml at REF: ` for the file of a git ref)."""
    name = stack_file(stack)
    named = f"{name} at {ref}" if ref else name
    return [f"{named}:{line[len(name) + 1:]}" if line.startswith(name + ":") else f"{named}: {line}"
            for line in lines]


# libyaml's parser where PyYAML was built with it: the same documents from the renders this process
# or a tree's own code printed (no user's file), several times as fast as PyYAML's Python one.
_RENDER_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def summary(stack: str, before: Optional[str], after: Optional[str]) -> str:
    old = {render.doc_identity(d): d for d in yaml.load_all(before or "", Loader=_RENDER_LOADER) if d}
    new = {render.doc_identity(d): d for d in yaml.load_all(after or "", Loader=_RENDER_LOADER) if d}
    added = len(new.keys() - old.keys())
    removed = len(old.keys() - new.keys())
    changed = sum(1 for k in new.keys() & old.keys() if new[k] != old[k])
    return f"{stack}: {added} added, {changed} changed, {removed} removed"


class StacksRefused(ReviewError):
    """`diff` rendered and diffed every stack it could, and these it could not: one line a problem,
    each naming its file (a ConfigError's lines, as every command prints them)."""


def diff(root: Path, base: Optional[str], stacks: list[str], out: io.TextIOBase) -> int:
    """Print a unified diff and a summary line per stack. 0: no change, 1: changes (like diff).

    Every stack is rendered on its own: one whose file the working tree's code refuses (a user's
    stack file half written, say) is not diffed, and says so in its summary line, while every other
    stack is diffed; then StacksRefused names each refused file with each of its problems, once (and
    the ref's, where they differ). One refused at the ref only (the change mends or deletes it) is
    diffed against nothing, its summary line followed by the ref's problems."""
    base = base or default_base(root)
    commit = _git(root, "rev-parse", "--verify", f"{base}^{{commit}}")
    with tempfile.TemporaryDirectory(prefix="dynamo-lab-base-") as tmp:
        archive = _git(root, "archive", "--format=tar", commit, binary=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        # Every stack file either tree has, the lab's, the examples and a user's own alike (one a
        # change adds or removes shows as such).
        stacks = stacks or sorted(set(stack_files.stacks_in(root)) | set(stack_files.stacks_in(Path(tmp))))
        before, refused_before, failed_before = _render_tree(Path(tmp), stacks)
    after, refused_after, _ = _render_tree(root, stacks)
    refused = {stack: _naming_the_file(stack, None, lines) for stack, lines in refused_after.items()}
    # A file refused at the ref only (the change fixes or deletes it): no fault of the working tree's,
    # so it is diffed against nothing and its summary says why, rather than failing the diff of the
    # very change that mends it (a pull request's check would otherwise report the fix as broken).
    # The ref's code failing otherwise (a traceback) says nothing of the file and diffed nothing:
    # trouble, exit 2, never everything the stack deploys reported as added.
    mended: dict[str, list[str]] = {}
    for stack, lines in refused_before.items():
        if stack not in refused and stack not in failed_before:
            mended[stack] = _naming_the_file(stack, base, lines)
        # The ref's file refused as the working tree's is (the same file, the same code): said once.
        elif lines != refused_after.get(stack):
            refused[stack] = [*_naming_the_file(stack, base, lines), *refused.get(stack, [])]
    for stack in stacks:
        if before[stack] is None and after[stack] is None and stack not in refused and stack not in mended:
            try:  # named, and neither tree has its file: the refusal every command words alike
                stack_files.stack_file(stack, root)
            except stack_files.StackFileError as exc:
                refused[stack] = [f"{exc}; {base} has none either"]
    changed = False
    lines = []
    for stack in stacks:
        if stack in refused:
            lines.append(f"{stack}: not diffed (its error, on stderr, says why)")
            continue
        a, b = before[stack] or "", after[stack] or ""
        if a != b:
            changed = True
            out.writelines(difflib.unified_diff(
                a.splitlines(keepends=True), b.splitlines(keepends=True),
                fromfile=f"a/{stack} ({base})", tofile=f"b/{stack} (working tree)"))
        lines.append(summary(stack, before[stack], after[stack]))
        if stack in mended:
            lines[-1] += f" (against nothing: its file at {base} is refused, as follows)"
            lines += [f"  {line}" for line in mended[stack]]
    out.write("\n".join(lines) + "\n")
    if refused:
        out.flush()
        raise StacksRefused("\n".join(line for stack in stacks for line in refused.get(stack, [])))
    return 1 if changed else 0
