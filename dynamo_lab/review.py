"""Review without a cluster: golden renders, and `diff` between a git ref and the working tree."""

from __future__ import annotations

import difflib
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Optional

import yaml

from dynamo_lab import mockrun, render, stack_files
from infra import catalogue
from infra.errors import UserError

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


def _render_tree(tree: Path, stacks: list[str]) -> dict[str, Optional[str]]:
    """Render stacks with the code and stack files in `tree`.

    The tree whose code is running (or the same code) renders in this process. Any other tree renders in
    processes of its own, with its own code, all stacks at once, through the entry that tree has:
    `python -m dynamo_lab render STACK`; `python -m infra.lab render STACK` in refs from before the
    toolbox became a package of its own, `python -m infra render STACK` in refs from before the lab's
    command line had a package entry of its own."""
    present = [s for s in stacks if (tree / f"Pulumi.{s}.yaml").is_file()]
    out: dict[str, Optional[str]] = {s: None for s in stacks}
    if _running_code_is(tree):
        for stack in present:
            try:
                out[stack] = render_yaml(stack, tree)
            except UserError as exc:
                raise ReviewError(f"render {stack} in {tree} failed:\n{exc}") from None
        return out
    entry = ("dynamo_lab" if (tree / "dynamo_lab" / "__main__.py").is_file()
             else "infra.lab" if (tree / "infra" / "lab" / "__main__.py").is_file() else "infra")
    procs = {stack: subprocess.Popen([sys.executable, "-m", entry, "render", stack], cwd=tree,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for stack in present}
    for stack, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise ReviewError(f"render {stack} in {tree} failed:\n{stderr.strip()}")
        out[stack] = stdout
    return out


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


def diff(root: Path, base: Optional[str], stacks: list[str], out: io.TextIOBase) -> int:
    """Print a unified diff and a summary line per stack. 0: no change, 1: changes (like diff)."""
    base = base or default_base(root)
    commit = _git(root, "rev-parse", "--verify", f"{base}^{{commit}}")
    with tempfile.TemporaryDirectory(prefix="dynamo-lab-base-") as tmp:
        archive = _git(root, "archive", "--format=tar", commit, binary=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        # Every stack file either tree has, the lab's, the examples and a user's own alike (one a
        # change adds or removes shows as such).
        stacks = stacks or sorted(set(stack_files.stacks_in(root)) | set(stack_files.stacks_in(Path(tmp))))
        before = _render_tree(Path(tmp), stacks)
    after = _render_tree(root, stacks)
    changed = False
    lines = []
    for stack in stacks:
        a, b = before[stack] or "", after[stack] or ""
        if a != b:
            changed = True
            out.writelines(difflib.unified_diff(
                a.splitlines(keepends=True), b.splitlines(keepends=True),
                fromfile=f"a/{stack} ({base})", tofile=f"b/{stack} (working tree)"))
        lines.append(summary(stack, before[stack], after[stack]))
    out.write("\n".join(lines) + "\n")
    return 1 if changed else 0
