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
Two builds run at once (BUILDS_AT_ONCE), the most valuable first: one's module downloads and
single-threaded link use what the other's compiles leave of 2 cores, and a kube-apiserver link's
GBs of memory fit twice on a CI machine.

Run as root (the cluster tier, `up --local`): nothing another user can change is run. Every
directory from / down to a binary (the cache's, under the `$HOME` that `sudo -E` and the workflows
keep, so a user's ~/.cache is refused: set DYNAMO_LAB_CACHE to a directory of root's), the binary
and the stamp must be owned by root and not group- or other-writable (a sticky directory such as
/tmp excepted, above the cache), and none a symbolic link, or the tool is refused with the fix; a
binary of yours (on PATH, or in DYNAMO_LAB_K8S_BIN or KUBEBUILDER_ASSETS) and every directory above
it are held to the same rule before it is even asked its version. Every run of a binary opens it,
checks it again on the open file (its sha256 against its stamp's) and runs that very file
(root_paths.open_binary), so a binary swapped after the check is not what runs.

Some pinned tools cannot be had from the Go module proxy this project reaches (it serves a chosen
set of modules): those are listed with the reason and reported as unavailable, never replaced by
another version.

Standard library only: dev.py runs this with the Python that runs dev.py.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from dynamo_lab.local_cluster import root_paths
from dynamo_lab.local_cluster.tool_build import (
    COLD_BUILD,
    HEARTBEAT_S,
    KWOK_STAGES,
    build,
    go_binary,
    module_dir,
    wrapper_go_sum,
)
from dynamo_lab.local_cluster.tool_spec import Tool
from dynamo_lab.local_cluster.tool_trust import ToolChoice, decide, file_sha256, read_stamp, version_of
from dynamo_lab.paths import ROOT  # noqa: F401 - where the wrappers are (tool_build.WRAPPERS), and the tests' reference

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
                    "and the CLI takes its runtime from there (dynamo_lab/local_cluster/pulumi_driver.py)"),
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
        # cache entry it is installed as (dynamo_lab/local_cluster/pulumi_driver.py).
        version_args=(), order=5),
    Tool(
        name="dynamo-operator", version="v1.6.2", module="github.com/ai-dynamo/dynamo/deploy/operator",
        module_version="", binaries=("dynamo-operator",), order=7,
        unavailable="the Go module proxy serves no version of this module (nor of "
                    "github.com/ai-dynamo/dynamo), so neither the operator of the v1.6.2 release "
                    "commit nor its CRDs (config/crd/bases/ in the module zip) can be fetched"),
)
BY_NAME = {t.name: t for t in TOOLS}


# Builds at once. Measured on the shared 2-core machine (2026-12-06, cold: empty Go module and build
# caches, other work at load average 3-12 beside it): etcd then kwok took 320 s (266 s of CPU);
# both at once 260 s (257 s of CPU), though the load beside them was the higher then.
# Not more, and the order hardly matters: each build alone keeps 1.75-1.9 compiles running on
# average (sampled each second, 2026-12-06), so two at once already leave no core idle; a model
# fed those samples ends the five builds within 1.5% of each other in any of the 120 orders. Nor do
# tools share much work through the build cache: each pins its own golang.org/x/sys, protobuf and
# k8s.io versions (the wrappers' go.mod), so besides the standard library (about 36 s of CPU) two
# tools share 8 to 69 compiled packages of their 367 to 2,104 (docs/testing.md).
BUILDS_AT_ONCE = 2


def cache_root(env: Mapping[str, str]) -> Path:
    """The cache of built tools, outside the clone, shared by every clone of the machine's user."""
    if env.get("DYNAMO_LAB_CACHE"):
        return Path(env["DYNAMO_LAB_CACHE"]) / "cluster-tools"
    xdg = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(xdg) / "dynamo-lab" / "cluster-tools"


def _trusted_uid() -> Optional[int]:
    """Whose files may be run: root's alone when root runs this; a user runs their own cache."""
    return root_paths.trusted_uid()


def ensure(names: Sequence[str] = (), env: Optional[Mapping[str, str]] = None,
           log: Callable[[str], None] = print) -> dict[str, ToolChoice]:
    """Find or build the named tools (all when none is named): BUILDS_AT_ONCE builds at once, most
    valuable first; the result in the tools' order."""
    env = dict(os.environ if env is None else env)
    root = cache_root(env)
    trusted_uid = _trusted_uid()
    tools = sorted((BY_NAME[n] for n in names) if names else TOOLS, key=lambda t: t.order)
    results: dict[str, ToolChoice] = {}
    try:
        # Its own mode (0755 whatever the umask): root refuses a cache root others can write. Made by
        # root_paths' walk, as root refused under a symbolic link or a directory another user could change.
        root_paths.make_dirs(root, trusted_uid, mode=0o755)
    except root_paths.Refused as e:
        for tool in tools:
            results[tool.name] = ToolChoice(tool, "refused", None, f"refusing the cache {root}: {e.why}, so another "
                                          f"user could change what root runs; fix: {e.fix}, or set DYNAMO_LAB_CACHE "
                                          "to a directory only root can write (e.g. /var/cache/dynamo-lab)")
            log(f"{tool.name} {tool.version}: REFUSED: {results[tool.name].detail}")
        return results

    def decision(tool: Tool) -> ToolChoice:
        return decide(tool, env, root, wrapper_go_sum(tool), shutil.which, version_of, read_stamp,
                      digest=file_sha256, lstat=os.lstat, trusted_uid=trusted_uid)

    first = {tool.name: decision(tool) for tool in tools}
    to_build = [t for t in tools if first[t.name].action == "build"]
    if to_build:
        log(f"{len(to_build)} of {len(tools)} tools to build from Go modules "
            f"({', '.join(t.name for t in to_build)}), {min(BUILDS_AT_ONCE, len(to_build))} at once: a cold "
            f"build of all five one at a time took {COLD_BUILD}; each build says every {HEARTBEAT_S:.0f} s "
            "how far it is")

    def built(tool: Tool) -> tuple[ToolChoice, float]:
        t0 = time.monotonic()
        d = first[tool.name]
        if d.detail:
            log(f"{tool.name}: {d.detail}")
        try:
            took = build(tool, root, env, log)
        except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
            log(f"{tool.name} {tool.version}: FAILED after {time.monotonic() - t0:.0f} s: {e}")
            return ToolChoice(tool, "failed", None, str(e)), time.monotonic() - t0
        return ToolChoice(tool, "built", d.bin_dir, f"in {took:.0f} s"), time.monotonic() - t0

    def said(tool: Tool, d: ToolChoice, took: float) -> None:
        if d.action == "refused":
            log(f"{tool.name} {tool.version}: REFUSED: {d.detail}")
        elif d.action == "unavailable":
            log(f"{tool.name} {tool.version}: UNAVAILABLE: {d.detail}")
        elif d.action != "failed":
            outs = [version_of(d.bin_dir / b, tool).splitlines()[:1] for b in tool.binaries]
            says = "; ".join(f"{b}: {o[0] if o else '?'}" for b, o in zip(tool.binaries, outs, strict=True))
            built_s = (read_stamp(d.bin_dir.parent) or {}).get("built_s") if d.action == "cached" else None
            how = {"found": "found (yours)", "cached": f"cached (its build took {built_s} s)",
                   "built": "built"}[d.action]
            log(f"{tool.name} {tool.version}: {how} in {d.bin_dir} ({took:.1f} s) [{says}]")

    done: dict[str, ToolChoice] = {}
    for tool in tools:  # what needs no build first, in order
        d = first[tool.name]
        if d.action != "build":
            if d.detail and d.action == "cached":
                log(f"{tool.name}: {d.detail}")
            said(tool, d, 0.0)
            done[tool.name] = d
    if to_build:
        # A thread waits on each `go build`; handed out in order, so the most valuable start first.
        with concurrent.futures.ThreadPoolExecutor(max_workers=BUILDS_AT_ONCE) as pool:
            futures = {pool.submit(built, tool): tool for tool in to_build}
            for future in concurrent.futures.as_completed(futures):
                tool = futures[future]
                done[tool.name], took = future.result()
                said(tool, done[tool.name], took)
    return {tool.name: done[tool.name] for tool in tools}


def kwok_stages(bin_dir: Path, env: Optional[Mapping[str, str]] = None) -> Path:
    """The directory of kwok's Stage files: beside a kwok we built, else from its module."""
    here = bin_dir.parent / "stages"
    if all((here / rel).is_file() for rel in KWOK_STAGES):
        return here
    kwok = BY_NAME["kwok"]
    stages = module_dir(go_binary(), f"{kwok.module}@{kwok.module_version}", dict(env or os.environ))
    return stages / "kustomize" / "stage"


def bin_dirs(results: Mapping[str, ToolChoice]) -> dict[str, Path]:
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
    said = threading.Lock()

    def log(message: str) -> None:
        # Two builds log from two threads, their heartbeats due at the same moments: print writes a
        # line and its newline apart, so one line is one write, under a lock.
        with said:
            sys.stdout.write(f"cluster-tools: {message}\n")
            sys.stdout.flush()

    results = ensure(args.tools, log=log)
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
