"""Building one pinned tool from its wrapper module (tools/cluster/<tool>/: a go.mod requiring the
tool's module, a go.sum pinning every module by hash) into a new cache entry, replaced whole: go
build with go.sum as the only truth, what a tool needs before (the provider's source copy and
embeds) and after (kwok's Stage files, the CLI's language host script), and a heartbeat while it
runs.

Standard library only (tools.py says why).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from dynamo_lab.local_cluster import root_paths
from dynamo_lab.local_cluster.tool_spec import Tool
from dynamo_lab.local_cluster.tool_trust import STAMP, entry_dir, seal, stamp_for
from dynamo_lab.paths import ROOT

WRAPPERS = ROOT / "tools" / "cluster"
# The Stage objects kwok needs (in its module zip under kustomize/stage/), kept in its cache entry.
KWOK_STAGES = ("node/fast/node-initialize.yaml", "node/heartbeat/node-heartbeat.yaml",
               "pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml")


def build_command(tool: Tool, out_dir: Path) -> list[str]:
    cmd = ["go", "build", "-trimpath"]
    if tool.pgo_off:
        cmd.append("-pgo=off")
    cmd.append("-v")  # a line per package compiled: the progress run_build reports
    # No DWARF from the compiler: -ldflags -w drops it from the binary anyway, so only the build pays
    # for it. Measured on 2 cores (k8s.io/client-go/kubernetes in a scratch GOCACHE, two runs each):
    # 117.1 and 117.5 s of user CPU without, 103.5 and 98.8 s with, and a fifth less peak memory. The
    # code is the same: what differs in the binary is the build settings it records (`go version -m`)
    # and what moves after them. Nothing else in the compile is spare: the same tree over a cached
    # standard library (2026-12-06, load 5-7) took 93.6 and 99.2 s of CPU without inlining (-l)
    # against 89.5-97.0 s as is, and 122.8 s (one run) with one backend thread a compile (-c=1, its
    # 128 MB starting heap kept by -d=gcstart=128).
    cmd.append("-gcflags=all=-dwarf=false")
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
    # No GOGC: any GOGC in the environment turns off the compiler's own 128 MB starting heap
    # (cmd/compile/internal/gc/main.go, Go 1.26), which already spares most packages a collection.
    # Measured on 2 cores (k8s.io/client-go/kubernetes over a cached standard library, 2026-12-06,
    # load 5-7 beside it): 89.5, 97.0 and 93.3 s of CPU as is, 98.7 s with GOGC=200, 86.6 and
    # 90.5 s with GOGC=400 at 1.6 times the peak memory (605-646 MB against 390-398 MB): no gain
    # beyond the noise. The linker, which has no such heap of its own, is not worth it either: the
    # three Kubernetes binaries relink from a warm cache in 12 s (11.6-12.6 s of CPU, GOGC 100, 200
    # or 400 alike), of a 480 s build.
    return out


def go_binary() -> str:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if not go:
        sys.exit("cluster-tools: `go` not found (Go 1.26 is needed to build the tools)")
    return go


def wrapper_go_sum(tool: Tool) -> Optional[str]:
    path = WRAPPERS / tool.name / "go.sum"
    return path.read_text() if path.is_file() else None


def module_dir(go: str, module: str, env: Mapping[str, str]) -> Path:
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
        stages = module_dir(go, f"{tool.module}@{tool.module_version}", env) / "kustomize" / "stage"
        for rel in KWOK_STAGES:
            target = bin_dir.parent / "stages" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(stages / rel, target)
    if tool.name == "pulumi":
        sdk = subprocess.run([go, "list", "-m", "-f", "{{.Path}}@{{.Version}}",
                              "github.com/pulumi/pulumi/sdk/v3"], cwd=src, capture_output=True,
                             text=True, env=env, check=True).stdout.strip()
        script = module_dir(go, sdk, env) / "python" / "cmd" / "pulumi-language-python-exec"
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
    go = go_binary()
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
        # Removed by root_paths' walk, never through a link (ensure made `root` by it, so the
        # temporary directory and the rename below stay inside what was checked).
        root_paths.remove_tree(entry, root_paths.trusted_uid())
        work.rename(entry)
        return took
    finally:
        with contextlib.suppress(root_paths.Refused):  # a link found there now is left, not followed
            root_paths.remove_tree(work, root_paths.trusted_uid(), ignore_errors=True)

