"""`python3 dev.py cluster-tools`: the cluster tier's binaries, pinned, found or built from Go modules.

Every tool is pinned to one release. A tool the user already has is used as it is: `pulumi` (and
`kwok`) on PATH at the pinned version, or a directory of Kubernetes test binaries (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler; the layout of KUBEBUILDER_ASSETS) named by
DYNAMO_LAB_K8S_BIN or KUBEBUILDER_ASSETS. Anything else is built with `go build` from a small
wrapper module in tools/cluster/<tool>/ (its go.mod requires the tool's module, its go.sum pins
every module by hash), into a cache outside the clone:

    ${DYNAMO_LAB_CACHE:-${XDG_CACHE_HOME:-~/.cache}/dynamo-lab}/cluster-tools/<tool>-<version>/bin/

A stamp file there (stamp.json) records what was built from which go.sum and the sha256 of every
file the build left in bin/; a later run reuses the binaries only when its stamp matches and every
file still has its recorded sha256 (otherwise the entry is rebuilt, saying which file differs).
Builds run one at a time (a kube-apiserver link takes GBs of memory).

Run as root (the cluster tier, `up --local`), with a cache under a `$HOME` that `sudo -E` and the
workflows keep: nothing another user can write is run. Every directory from the cache root down to
a binary, the binary and the stamp must be owned by root and not group- or other-writable, or the
tool is refused with the fix; a binary of yours (on PATH, or in DYNAMO_LAB_K8S_BIN or
KUBEBUILDER_ASSETS) and its directory are held to the same rule before it is even asked its version.

Some pinned tools cannot be had from the Go module proxy this project reaches (it serves a chosen
set of modules): those are listed with the reason and reported as unavailable, never replaced by
another version.

Standard library only: dev.py runs this with the Python that runs dev.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

ROOT = Path(__file__).resolve().parents[3]
WRAPPERS = ROOT / "tools" / "cluster"
STAMP = "stamp.json"
# Bumped when the layout of a cache entry or the stamp changes: older entries are rebuilt.
# 2: the stamp records each bin/ file's sha256, checked before every use (format 1 recorded none,
# so an entry of format 1 is never trusted).
STAMP_FORMAT = 2
# What a file name recorded in a stamp may be: a plain name inside bin/, never a path.
_BIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

KUBERNETES = "v1.34.4"
PULUMI = "v3.274.1"
# The provider the cluster tier runs, and the pulumi-kubernetes the project pins (pyproject.toml):
# the same release, so what the tier runs is what a user's `pulumi up` downloads.
PROVIDER = "v4.25.0"


def _k8s_ldflags(version: str) -> tuple[str, ...]:
    """The version the binaries report (without them the server says v0.0.0, which breaks Helm's
    kubeVersion check, preflight's version check and the provider's version-gated awaits)."""
    major, minor = version.lstrip("v").split(".")[:2]
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.gitVersion={version}", f"-X {pkg}.gitMajor={major}",
                  f"-X {pkg}.gitMinor={minor}", f"-X {pkg}.gitTreeState=clean",
                  f"-X {pkg}.buildDate=1970-01-01T00:00:00Z"]
    return tuple(flags)


@dataclasses.dataclass(frozen=True)
class Tool:
    name: str                        # the wrapper's directory (tools/cluster/<name>) and cache key
    version: str                     # the pinned release, as its project names it
    module: str                      # the Go module that holds its main package(s)
    module_version: str              # the version of `module` the wrapper requires
    binaries: tuple[str, ...]        # what the build writes into bin/
    packages: tuple[str, ...] = ()   # the main packages to build
    ldflags: tuple[str, ...] = ()
    pgo_off: bool = False
    version_args: tuple[str, ...] = ("--version",)
    accept: str = ""                 # regex the --version output of a found binary must match
    found_in: str = ""               # "path": look on PATH; "k8s-dir": the test-binaries directory
    unavailable: str = ""            # why it cannot be built here; empty when it can
    source_sum: str = ""             # the module zip's h1: hash, where its source is copied and built
    order: int = 0                   # build order: the most valuable first

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


TOOLS: tuple[Tool, ...] = (
    Tool(
        name="kubernetes", version=KUBERNETES, module="k8s.io/kubernetes", module_version=KUBERNETES,
        binaries=("kube-apiserver", "kube-controller-manager", "kube-scheduler"),
        packages=tuple(f"k8s.io/kubernetes/cmd/{b}" for b in
                       ("kube-apiserver", "kube-controller-manager", "kube-scheduler")),
        ldflags=_k8s_ldflags(KUBERNETES), pgo_off=True,
        accept=r"^Kubernetes v1\.34\.\d+$", found_in="k8s-dir", order=1),
    Tool(
        name="etcd", version="v3.6.16", module="go.etcd.io/etcd/server/v3", module_version="v3.6.16",
        binaries=("etcd",), packages=("go.etcd.io/etcd/server/v3",), pgo_off=True,
        accept=r"etcd Version: 3\.6\.\d+", found_in="k8s-dir", order=2),
    Tool(
        name="kwok", version="v0.8.0", module="sigs.k8s.io/kwok", module_version="v0.8.0",
        binaries=("kwok",), packages=("sigs.k8s.io/kwok/cmd/kwok",),
        ldflags=("-X sigs.k8s.io/kwok/pkg/consts.Version=v0.8.0",),
        accept=r"\bv?0\.8\.0\b", found_in="path", order=3),
    Tool(
        name="pulumi", version=PULUMI, module="github.com/pulumi/pulumi/pkg/v3", module_version=PULUMI,
        binaries=("pulumi",), packages=("github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",),
        ldflags=(f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={PULUMI}",),
        version_args=("version",), accept=rf"^{re.escape(PULUMI)}$", found_in="path", order=4),
    Tool(
        name="pulumi-language-python", version=PULUMI,
        module="github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3", module_version="",
        binaries=("pulumi-language-python",), order=6,
        unavailable="the Go module proxy serves no version of this module (its version list and "
                    "every query answer 'This module version is not available.'); not needed: the "
                    "cluster tier runs the program in-process as an Automation API inline program, "
                    "and the CLI takes its runtime from there (infra/lab/cluster/engine.py)"),
    Tool(
        # The proxy serves this module only as the pseudo-version of commit f47bc2d6f199, which is
        # pulumi/pulumi-kubernetes' v4.25.0 release tag (releases are tagged at the repository root).
        # The wrapper builds a copy of it (see _before_build): the zip lacks the two generated files
        # its main embeds and replaces the SDK by a directory it does not hold.
        name="pulumi-resource-kubernetes", version=PROVIDER,
        module="github.com/pulumi/pulumi-kubernetes/provider/v4",
        module_version="v4.0.0-20260115033456-f47bc2d6f199",
        source_sum="h1:j2bphCf7c2YhnBrhwht2f3TNRRgcMImltUlAgzxr9H4=",
        binaries=("pulumi-resource-kubernetes",),
        packages=("github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes",),
        ldflags=(f"-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version={PROVIDER.lstrip('v')}",),
        # No --version flag: the binary serves gRPC. The engine learns its version from the plugin
        # cache entry it is installed as (infra/lab/cluster/engine.py).
        version_args=(), order=5),
    Tool(
        name="dynamo-operator", version="v1.6.2", module="github.com/ai-dynamo/dynamo/deploy/operator",
        module_version="", binaries=("dynamo-operator",), order=7,
        unavailable="the Go module proxy serves no version of this module (nor of "
                    "github.com/ai-dynamo/dynamo), so neither the operator of the v1.6.2 release "
                    "commit nor its CRDs (config/crd/bases/ in the module zip) can be fetched"),
)
BY_NAME = {t.name: t for t in TOOLS}
# The Stage objects kwok needs (in its module zip under kustomize/stage/), kept in its cache entry.
KWOK_STAGES = ("node/fast/node-initialize.yaml", "node/heartbeat/node-heartbeat.yaml",
               "pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml")


# ---- pure parts: where a tool lives, what its stamp says, whether to build ----

def cache_root(env: Mapping[str, str]) -> Path:
    """The cache of built tools, outside the clone, shared by every clone of the machine's user."""
    if env.get("DYNAMO_LAB_CACHE"):
        return Path(env["DYNAMO_LAB_CACHE"]) / "cluster-tools"
    xdg = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(xdg) / "dynamo-lab" / "cluster-tools"


def entry_dir(tool: Tool, root: Path) -> Path:
    return root / tool.key


def go_sum_digest(go_sum: str) -> str:
    return hashlib.sha256(go_sum.encode()).hexdigest()


def stamp_for(tool: Tool, go_sum: str, go_version: str, built_s: float, sha256: Mapping[str, str]) -> dict:
    """What a build records; `sha256`: each file it left in bin/ by name."""
    return {"format": STAMP_FORMAT, "tool": tool.name, "version": tool.version,
            "module": f"{tool.module}@{tool.module_version}", "go_sum_sha256": go_sum_digest(go_sum),
            "binaries": list(tool.binaries), "sha256": dict(sorted(sha256.items())), "go": go_version,
            "built_s": round(built_s, 1)}


def stamp_problem(tool: Tool, stamp: Optional[dict], go_sum: str, bin_dir: Path,
                  digest: Callable[[Path], Optional[str]]) -> Optional[str]:
    """Why a cache entry is not the one this run would build (None: it is): another version, another
    go.sum, an older stamp format, or a file of bin/ whose sha256 (read by `digest`, None when it
    cannot be read) is not the one recorded when it was built."""
    if not isinstance(stamp, dict):
        return "it has no readable stamp"
    if stamp.get("format") != STAMP_FORMAT:
        return (f"its stamp is format {stamp.get('format')!r}, not {STAMP_FORMAT} (older stamps record "
                f"no sha256 of the binaries, so they are not trusted)")
    built = (stamp.get("tool"), stamp.get("version"), stamp.get("module"))
    if built != (tool.name, tool.version, f"{tool.module}@{tool.module_version}"):
        return f"it was built as {built}, not {(tool.name, tool.version, f'{tool.module}@{tool.module_version}')}"
    if stamp.get("go_sum_sha256") != go_sum_digest(go_sum):
        return f"it was built from another tools/cluster/{tool.name}/go.sum"
    sums = stamp.get("sha256")
    if not isinstance(sums, dict) or sorted(stamp.get("binaries") or []) != sorted(tool.binaries) \
            or not set(tool.binaries) <= set(sums) \
            or not all(isinstance(n, str) and _BIN_NAME.match(n) and isinstance(h, str) and _SHA256.match(h)
                       for n, h in sums.items()):
        return f"its stamp's sha256 record does not name each of {', '.join(tool.binaries)} by a sha256"
    for name, want in sums.items():
        got = digest(bin_dir / name)
        if got is None:
            return f"{bin_dir / name} is missing or unreadable"
        if got != want:
            return f"{bin_dir / name} has sha256 {got[:16]}..., not the {want[:16]}... recorded when it was built"
    return None


def stamp_matches(tool: Tool, stamp: Optional[dict], go_sum: str, bin_dir: Path,
                  digest: Callable[[Path], Optional[str]]) -> bool:
    """A cache entry is reused only when built from this version and this very go.sum, and every
    file of its bin/ is, byte for byte, what that build wrote."""
    return stamp_problem(tool, stamp, go_sum, bin_dir, digest) is None


def _who(uid: int) -> str:
    return "root" if uid == 0 else f"uid {uid}"


def loose(path: Path, st, uid: int) -> Optional[str]:
    """Why another user than `uid` could change `path` (its lstat `st`), or None: owned by someone
    else, or a group or other write bit (whoever is in the group, or anyone, could replace it)."""
    if st.st_uid != uid:
        return f"{path} is owned by uid {st.st_uid}, not {_who(uid)}"
    bits = [w for w, bit in (("group", 0o020), ("other", 0o002)) if st.st_mode & bit]
    if bits:
        return f"{path} is {'- and '.join(bits)}-writable (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def unsafe_cache(tool: Tool, root: Path, stamp_names: Sequence[str], lstat: Callable[[Path], object],
                 uid: int) -> Optional[str]:
    """As root: the cache root, the entry, its bin/, each file run from it and the stamp, each owned by
    `uid` and writable by it alone, each the kind of file this code makes (never a symbolic link); the
    first that is not, as one line with its fix (None: all are, or are not there yet: a build makes them)."""
    entry = entry_dir(tool, root)
    names = list(dict.fromkeys([*tool.binaries, *(n for n in stamp_names if _BIN_NAME.match(n))]))
    chain = [(root, True), (entry, True), (entry / "bin", True), *((entry / "bin" / n, False) for n in names),
             (entry / STAMP, False)]
    for path, is_dir in chain:
        try:
            st = lstat(path)
        except FileNotFoundError:
            if path in (root, entry, entry / "bin"):
                break
            continue
        # The kind first: a symbolic link's own mode bits mean nothing, where it points does.
        kind_ok = stat.S_ISDIR(st.st_mode) if is_dir else stat.S_ISREG(st.st_mode)
        why = loose(path, st, uid) if kind_ok else f"{path} is not a {'directory' if is_dir else 'regular file'}"
        if not why:
            continue
        if path == root:
            fix = (f"chmod go-w {root}" if st.st_uid == uid and kind_ok else
                   f"chown {_who(uid)} {root} after checking what is in it" if kind_ok else
                   f"replace {root} by a directory")
            fix += f", or set DYNAMO_LAB_CACHE to a directory only {_who(uid)} can write"
        elif st.st_uid == uid and kind_ok:
            fix = f"chmod go-w {path} (or rm -rf {entry} to rebuild it)"
        else:
            fix = f"rm -rf {entry} (the next run rebuilds it)"
        return f"refusing the cached {tool.name}: {why}, so another user could change what root runs; fix: {fix}"
    return None


def unsafe_found(d: Path, bins: Sequence[Path], lstat: Callable[[Path], object], uid: int) -> Optional[str]:
    """As root: a binary of the user's, the file it resolves to and their directories, each owned by
    `uid` and writable by it alone; the first that is not, as one line with its fix."""
    paths: list[Path] = []
    for p in (d, *bins):
        real = Path(os.path.realpath(p))
        paths += [real] if p == d else [real.parent, real]
    for path in dict.fromkeys(paths):
        try:
            st = lstat(path)
        except OSError as e:
            return f"{path}: cannot be checked ({e.strerror}): not run"
        why = loose(path, st, uid)
        if why:
            fix = f"chmod go-w {path}" if st.st_uid == uid else f"chown {_who(uid)} {path}"
            return f"{why}, so another user could change what root runs: not run (fix: {fix})"
    return None


def version_ok(tool: Tool, output: str) -> bool:
    return bool(tool.accept) and any(re.search(tool.accept, line.strip()) for line in output.splitlines())


def user_dir(env: Mapping[str, str]) -> Optional[Path]:
    """The directory of Kubernetes test binaries the user names, if any."""
    for var in ("DYNAMO_LAB_K8S_BIN", "KUBEBUILDER_ASSETS"):
        if env.get(var):
            return Path(env[var])
    return None


@dataclasses.dataclass(frozen=True)
class Decision:
    tool: Tool
    action: str                 # "found", "cached", "build", "unavailable", "refused"
    bin_dir: Optional[Path]     # where its binaries are (or will be)
    detail: str = ""


def candidates(tool: Tool, env: Mapping[str, str], which: Callable[[str], Optional[str]]) -> list[Path]:
    """Where a binary the user already has might be, by the tool's kind of lookup."""
    if tool.found_in == "path":
        hit = which(tool.binaries[0])
        return [Path(hit).parent] if hit else []
    if tool.found_in == "k8s-dir":
        d = user_dir(env)
        return [d] if d else []
    return []


def decide(tool: Tool, env: Mapping[str, str], root: Path, go_sum: Optional[str],
           which: Callable[[str], Optional[str]], version_of: Callable[[Path, Tool], str],
           read_stamp: Callable[[Path], Optional[dict]], *, digest: Callable[[Path], Optional[str]],
           lstat: Callable[[Path], object], trusted_uid: Optional[int]) -> Decision:
    """Found (the user's, at the pinned version), cached (our stamp and sha256s match), build,
    unavailable, or refused (`trusted_uid` set, as when root runs it: a cache path someone else
    could write).

    A user's binary at another version, or (trusted_uid set) one someone else could write, is not
    used, and said so; the tool is then built. A cache entry whose files are not what was built is
    rebuilt, and said so.
    """
    notes = []
    for d in candidates(tool, env, which):
        bins = [d / b for b in tool.binaries]
        if not all(b.is_file() and os.access(b, os.X_OK) for b in bins):
            notes.append(f"{d} lacks {', '.join(b.name for b in bins if not b.is_file())}")
            continue
        if trusted_uid is not None:
            why = unsafe_found(d, bins, lstat, trusted_uid)
            if why:
                notes.append(why)
                continue
        outputs = [version_of(b, tool) for b in bins]
        bad = [f"{b.name} says {o.strip().splitlines()[0] if o.strip() else 'nothing'!r}"
               for b, o in zip(bins, outputs, strict=True) if not version_ok(tool, o)]
        if not bad:
            return Decision(tool, "found", d, outputs[0].strip().splitlines()[0])
        notes.append(f"{d}: not {tool.version}: " + "; ".join(bad))
    if tool.unavailable:
        return Decision(tool, "unavailable", None, tool.unavailable)
    if go_sum is None:
        return Decision(tool, "unavailable", None, f"no wrapper module in tools/cluster/{tool.name}/")
    entry = entry_dir(tool, root)
    bin_dir = entry / "bin"
    stamp = read_stamp(entry)
    if trusted_uid is not None:
        sums = stamp.get("sha256") if isinstance(stamp, dict) else None
        why = unsafe_cache(tool, root, [n for n in sums if isinstance(n, str)] if isinstance(sums, dict) else [],
                           lstat, trusted_uid)
        if why:
            return Decision(tool, "refused", None, why)
    if not lexists(entry, lstat):
        return Decision(tool, "build", bin_dir, "; ".join(notes))
    why = stamp_problem(tool, stamp, go_sum, bin_dir, digest)
    if why is None:
        return Decision(tool, "cached", bin_dir, "; ".join(notes))
    return Decision(tool, "build", bin_dir, "; ".join([*notes, f"not using {entry}: {why}; rebuilding it"]))


def lexists(path: Path, lstat: Callable[[Path], object]) -> bool:
    try:
        lstat(path)
    except FileNotFoundError:
        return False
    return True


def build_command(tool: Tool, out_dir: Path) -> list[str]:
    cmd = ["go", "build", "-trimpath"]
    if tool.pgo_off:
        cmd.append("-pgo=off")
    cmd.append("-v")  # a line per package compiled: the progress run_build reports
    # One package: name the file (a module path ending in /v3 would otherwise name it "server").
    out = str(out_dir / tool.binaries[0]) if len(tool.packages) == 1 else str(out_dir) + os.sep
    cmd += ["-ldflags", " ".join(("-s", "-w", *tool.ldflags)), "-o", out, *tool.packages]
    return cmd


def build_env(env: Mapping[str, str]) -> dict[str, str]:
    """Static binaries, go.sum as the only truth (-mod=readonly: a missing or different hash fails)."""
    out = dict(env)
    out["CGO_ENABLED"] = "0"
    out["GOFLAGS"] = " ".join(f for f in (env.get("GOFLAGS", "").split()) if not f.startswith("-mod=")) \
        + " -mod=readonly -buildvcs=false"
    out["GOFLAGS"] = out["GOFLAGS"].strip()
    out.setdefault("GOTOOLCHAIN", "local")
    return out


# ---- the impure parts: running go and the binaries ----

def _go() -> str:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if not go:
        sys.exit("cluster-tools: `go` not found (Go 1.26 is needed to build the tools)")
    return go


def _version_of(binary: Path, tool: Tool) -> str:
    if not tool.version_args:
        return f"{tool.version} (as built; it has no version flag)"
    try:
        p = subprocess.run([str(binary), *tool.version_args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"(could not run: {e})"
    return (p.stdout + p.stderr).strip()


def read_stamp(entry: Path) -> Optional[dict]:
    try:
        return json.loads((entry / STAMP).read_text())
    except (OSError, ValueError):
        return None


def file_sha256(path: Path) -> Optional[str]:
    """The file's sha256, None when it cannot be read (O_NOFOLLOW: a symbolic link is not followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        try:
            return hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:
            return None


def seal(work: Path) -> dict[str, str]:
    """A finished build's entry made writable by its owner alone (what the umask let go build and
    mkdir leave group-writable would be refused as root), and the sha256 of each file in its bin/."""
    bin_dir = work / "bin"
    for path in [work, bin_dir, *bin_dir.iterdir(), *(work / "stages").rglob("*"), work / "stages"]:
        if path.exists() and not path.is_symlink():
            path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o022)
    sums = {}
    for path in sorted(bin_dir.iterdir()):
        if path.is_symlink() or not path.is_file():
            raise RuntimeError(f"the build left {path}, not a regular file, in bin/")
        digest = file_sha256(path)
        if digest is None:
            raise RuntimeError(f"cannot read {path} back to record its sha256")
        sums[path.name] = digest
    return sums


def _wrapper_go_sum(tool: Tool) -> Optional[str]:
    path = WRAPPERS / tool.name / "go.sum"
    return path.read_text() if path.is_file() else None


def _module_dir(go: str, module: str, env: Mapping[str, str]) -> Path:
    out = subprocess.run([go, "mod", "download", "-json", module], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"go mod download {module}: {out.stdout.strip()} {out.stderr.strip()}")
    return Path(json.loads(out.stdout)["Dir"])


def embed_files(cmd_dir: Path, version: str) -> None:
    """What the provider's `go generate` (cmd/pulumi-resource-kubernetes/generate.go) writes before
    a release build: the schema with the release's version, and the Terraform mapping, compact."""
    schema = json.loads((cmd_dir / "schema.json").read_text())
    schema["version"] = version
    (cmd_dir / "schema-embed.json").write_text(json.dumps(schema, separators=(",", ":")))
    mapping = json.loads((cmd_dir / "terraform-mapping.json").read_text())
    (cmd_dir / "terraform-mapping-embed.json").write_text(json.dumps(mapping, separators=(",", ":")))


def _before_build(tool: Tool, go: str, src: Path, env: Mapping[str, str]) -> None:
    """A tool built from a copy of its module (source_sum set): the module, checked against its
    pinned hash, copied to src/provider where the wrapper's replace points, with the embeds written."""
    if not tool.source_sum:
        return
    out = subprocess.run([go, "mod", "download", "-json", f"{tool.module}@{tool.module_version}"],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"go mod download {tool.module}@{tool.module_version}: {out.stdout.strip()} "
                           f"{out.stderr.strip()}")
    info = json.loads(out.stdout)
    if info.get("Sum") != tool.source_sum:
        raise RuntimeError(f"{tool.module}@{tool.module_version} has hash {info.get('Sum')}, "
                           f"not the pinned {tool.source_sum}: refusing to build it")
    copy = src / "provider"
    shutil.copytree(info["Dir"], copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)  # the module cache is read-only
    embed_files(copy / "cmd" / tool.binaries[0], tool.version.lstrip("v"))


def _after_build(tool: Tool, go: str, src: Path, bin_dir: Path, env: Mapping[str, str]) -> None:
    """The Pulumi CLI's language host runs `pulumi-language-python-exec`, a script of the SDK
    release: keep it beside `pulumi`, executable, as the release archives do."""
    if tool.name == "kwok":
        # kwok starts only with Stage objects: the ones its module ships, beside its binary.
        stages = _module_dir(go, f"{tool.module}@{tool.module_version}", env) / "kustomize" / "stage"
        for rel in KWOK_STAGES:
            target = bin_dir.parent / "stages" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(stages / rel, target)
    if tool.name == "pulumi":
        sdk = subprocess.run([go, "list", "-m", "-f", "{{.Path}}@{{.Version}}",
                              "github.com/pulumi/pulumi/sdk/v3"], cwd=src, capture_output=True,
                             text=True, env=env, check=True).stdout.strip()
        script = _module_dir(go, sdk, env) / "python" / "cmd" / "pulumi-language-python-exec"
        target = bin_dir / script.name
        shutil.copyfile(script, target)
        target.chmod(0o755)


# How often a build says it is alive, and what a cold build of every tool took here (2 cores,
# nothing else running: about 22 minutes, kube-apiserver and friends 524 s of it; 45 minutes
# with other work beside it, 2026-12-02).
HEARTBEAT_S = 30.0
COLD_BUILD = "about 22 minutes on 2 cores with nothing else running (45 minutes seen with other work beside it)"


def run_build(cmd: Sequence[str], cwd: Path, env: Mapping[str, str], logfile: Path, log: Callable[[str], None],
              heartbeat_s: float = HEARTBEAT_S) -> int:
    """Run `cmd` (go build -v) with its output in `logfile`, saying every `heartbeat_s` how long it
    has run and how many packages it has compiled (one line each of -v), so a build of minutes
    is seen to be alive. A Ctrl-C reaches go itself (one process group); the build is waited for."""
    started = time.monotonic()
    with open(logfile, "w") as out:
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT)
        try:
            while True:
                try:
                    return proc.wait(timeout=heartbeat_s)
                except subprocess.TimeoutExpired:
                    with open(logfile, errors="replace") as f:
                        compiled = sum(1 for line in f if line.strip() and " " not in line.strip())
                    minutes, seconds = divmod(int(time.monotonic() - started), 60)
                    log(f"still building: {minutes} min {seconds:02d} s, {compiled:,} packages compiled")
        except BaseException:
            proc.kill()
            proc.wait()
            raise


def build(tool: Tool, root: Path, env: Mapping[str, str], log: Callable[[str], None]) -> float:
    """Build `tool` into its cache entry; returns the seconds it took. The entry is replaced whole."""
    go = _go()
    entry = entry_dir(tool, root)
    work = Path(tempfile.mkdtemp(prefix=f".{tool.key}-", dir=root))
    try:
        src, bin_dir = work / "src", work / "bin"
        src.mkdir()
        bin_dir.mkdir()
        for name in ("go.mod", "go.sum"):
            shutil.copyfile(WRAPPERS / tool.name / name, src / name)
        benv = build_env(env)
        _before_build(tool, go, src, benv)
        cmd = build_command(tool, bin_dir)
        log(f"{tool.name} {tool.version}: building {', '.join(tool.binaries)} "
            f"({tool.module}@{tool.module_version}) ...")
        started = time.monotonic()
        logfile = work / "build.log"
        rc = run_build([go if c == "go" else c for c in cmd], src, benv, logfile,
                       lambda m: log(f"{tool.name} {tool.version}: {m}"))
        if rc != 0:
            tail = logfile.read_text()[-4000:]
            raise RuntimeError(f"go build failed (exit {rc}):\n{tail}")
        missing = [b for b in tool.binaries if not (bin_dir / b).is_file()]
        if missing:
            raise RuntimeError(f"go build wrote no {', '.join(missing)} (it wrote {sorted(os.listdir(bin_dir))})")
        _after_build(tool, go, src, bin_dir, benv)
        took = time.monotonic() - started
        go_version = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, env=benv).stdout.strip()
        sums = seal(work)
        (work / STAMP).write_text(json.dumps(stamp_for(tool, (src / "go.sum").read_text(), go_version, took,
                                                       sums), indent=2) + "\n")
        (work / STAMP).chmod(0o644)
        if entry.exists():
            shutil.rmtree(entry)
        work.rename(entry)
        return took
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def _trusted_uid() -> Optional[int]:
    """Whose files may be run: root's alone when root runs this; a user runs their own cache."""
    return 0 if os.geteuid() == 0 else None


def ensure(names: Sequence[str] = (), env: Optional[Mapping[str, str]] = None,
           log: Callable[[str], None] = print) -> dict[str, Decision]:
    """Find or build the named tools (all when none is named), serially, most valuable first."""
    env = dict(os.environ if env is None else env)
    root = cache_root(env)
    # Its own mode (0755 whatever the umask): root refuses a cache root others can write.
    root.mkdir(parents=True, exist_ok=True, mode=0o755)
    trusted_uid = _trusted_uid()
    tools = sorted((BY_NAME[n] for n in names) if names else TOOLS, key=lambda t: t.order)
    results: dict[str, Decision] = {}

    def decision(tool: Tool) -> Decision:
        return decide(tool, env, root, _wrapper_go_sum(tool), shutil.which, _version_of, read_stamp,
                      digest=file_sha256, lstat=os.lstat, trusted_uid=trusted_uid)

    first = {tool.name: decision(tool) for tool in tools}
    to_build = [t.name for t in tools if first[t.name].action == "build"]
    if to_build:
        log(f"{len(to_build)} of {len(tools)} tools to build from Go modules ({', '.join(to_build)}): a cold "
            f"build of all five took {COLD_BUILD}; each build says every {HEARTBEAT_S:.0f} s how far it is")
    for tool in tools:
        t0 = time.monotonic()
        d = first[tool.name]
        if d.action == "refused":
            log(f"{tool.name} {tool.version}: REFUSED: {d.detail}")
            results[tool.name] = d
            continue
        if d.detail and d.action in ("build", "cached"):
            log(f"{tool.name}: {d.detail}")
        if d.action == "build":
            try:
                took = build(tool, root, env, log)
            except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
                d = Decision(tool, "failed", None, str(e))
                log(f"{tool.name} {tool.version}: FAILED after {time.monotonic() - t0:.0f} s: {e}")
                results[tool.name] = d
                continue
            d = Decision(tool, "built", d.bin_dir, f"in {took:.0f} s")
        took = time.monotonic() - t0
        results[tool.name] = d
        if d.action == "unavailable":
            log(f"{tool.name} {tool.version}: UNAVAILABLE: {d.detail}")
        elif d.action != "failed":
            outs = [_version_of(d.bin_dir / b, tool).splitlines()[:1] for b in tool.binaries]
            says = "; ".join(f"{b}: {o[0] if o else '?'}" for b, o in zip(tool.binaries, outs, strict=True))
            built_s = (read_stamp(d.bin_dir.parent) or {}).get("built_s") if d.action == "cached" else None
            how = {"found": "found (yours)", "cached": f"cached (its build took {built_s} s)",
                   "built": "built"}[d.action]
            log(f"{tool.name} {tool.version}: {how} in {d.bin_dir} ({took:.1f} s) [{says}]")
    return results


def kwok_stages(bin_dir: Path, env: Optional[Mapping[str, str]] = None) -> Path:
    """The directory of kwok's Stage files: beside a kwok we built, else from its module."""
    here = bin_dir.parent / "stages"
    if all((here / rel).is_file() for rel in KWOK_STAGES):
        return here
    kwok = BY_NAME["kwok"]
    return _module_dir(_go(), f"{kwok.module}@{kwok.module_version}", dict(env or os.environ)) / "kustomize" / "stage"


def bin_dirs(results: Mapping[str, Decision]) -> dict[str, Path]:
    return {n: d.bin_dir for n, d in results.items() if d.bin_dir and d.action in ("found", "cached", "built")}


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="dev.py cluster-tools", description=__doc__.split("\n\n")[0])
    p.add_argument("tools", nargs="*", metavar="TOOL",
                   help="only these (default: all): " + ", ".join(t.name for t in TOOLS))
    p.add_argument("--allow-unavailable", action="store_true",
                   help="exit 0 even if a tool the proxy does not serve is missing (builds must still pass)")
    p.add_argument("--json", action="store_true", help="print the bin directories as JSON at the end")
    args = p.parse_args(argv)
    unknown = [n for n in args.tools if n not in BY_NAME]
    if unknown:
        p.error(f"unknown tool {', '.join(unknown)}; the tools are {', '.join(BY_NAME)}")
    results = ensure(args.tools, log=lambda m: print(f"cluster-tools: {m}", flush=True))
    if args.json:
        print(json.dumps({n: str(d) for n, d in bin_dirs(results).items()}, indent=2))
    refused = [n for n, d in results.items() if d.action == "refused"]
    failed = [n for n, d in results.items() if d.action == "failed"]
    missing = [n for n, d in results.items() if d.action == "unavailable"]
    if refused:
        return 2        # each refusal is its one line above, with its fix
    if failed or (missing and not args.allow_unavailable):
        print(f"cluster-tools: not ready: {', '.join(failed + missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
