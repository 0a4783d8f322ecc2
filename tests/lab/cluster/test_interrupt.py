"""Ctrl-C of the local commands: the engine is stopped the way Pulumi stops itself, and what is
said afterwards is what was checked.

The fast tests play the engine's driver with a small script (pulumi_cli.command replaced) that does
what the CLI does with SIGINT (pkg/backend/cancellation_scope.go, v3.274.1): it holds the stack's
lock in the file backend's place for it and runs a plugin in a session of its own, as the CLI
does; on the first SIGINT it says "^C received; cancelling", finishes, saves, unlocks and exits;
the stubborn one ignores SIGINT, as a CLI stuck in a step would. The cluster test sends a real
SIGINT, as a terminal's Ctrl-C, to `dynamo-lab up STACK --local`, during its preview and during
its creates, with the real engine on the local cluster.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Optional

import pytest

from dynamo_lab import procs, upstream
from dynamo_lab.local_cluster import harness, pulumi_cli, pulumi_workspace, tools
from tests.helpers import ROOT, wait_for

STACK = "cross-server"

# The driver's stand-in: argv MODE WORKSPACE STACK; TMPDIR is the run's (pulumi_cli.start).
DRIVER = textwrap.dedent("""\
    import os, signal, subprocess, sys, time
    from pathlib import Path
    mode, root, stack = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    lock = root / "state" / ".pulumi" / "locks" / "organization" / "dynamo-lab" / stack / "a1.json"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("{}")
    plugin = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
                              env={**os.environ, "PULUMI_HOME": str(root / "home")})
    (Path(os.environ["TMPDIR"]) / "event-log").mkdir()
    got = []
    signal.signal(signal.SIGINT, lambda *_: got.append(1))
    (root / "ready").write_text(str(plugin.pid))
    def count():  # whole or not at all: a SIGKILL between write_text's truncate and write left it empty
        (root / "sigints.tmp").write_text(str(len(got)))
        os.replace(root / "sigints.tmp", root / "sigints")
    while not got or mode == "stubborn":
        count()
        time.sleep(0.05)
    print("^C received; cancelling. If you would like to terminate immediately, press ^C again.", flush=True)
    time.sleep(0.3)  # the steps in flight
    saved = root / "state" / ".pulumi" / "stacks" / "dynamo-lab" / f"{stack}.json"
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text("{}")
    plugin.terminate()
    plugin.wait()
    lock.unlink()
    count()
    sys.exit(255)
    """)
# `pulumi`'s stand-in for `pulumi cancel`: records its arguments and, as the file backend's
# CancelCurrentUpdate does (pkg/backend/diy/backend.go), deletes the stack's lock files.
PULUMI = textwrap.dedent("""\
    import os, sys
    from pathlib import Path
    Path(os.environ["PULUMI_HOME"], "..", "cancel.args").write_text(" ".join(sys.argv[1:]))
    stack = sys.argv[sys.argv.index("--stack") + 1]
    for p in Path(os.environ["PULUMI_BACKEND_URL"][len("file://"):], ".pulumi", "locks").rglob("*.json"):
        if p.parent.name == stack:
            p.unlink()
    """)
# A command that runs pulumi_cli.invoke as local.up does, in a process group of its own (a terminal's
# foreground job), so the test's SIGINT is Ctrl-C; it prints what the Interrupted it got says.
INVOKER = textwrap.dedent("""\
    import json, sys
    from pathlib import Path
    from dynamo_lab.local_cluster import pulumi_cli, pulumi_workspace
    driver, mode, root = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    ws = pulumi_workspace.Workspace(root, "s1", root / "kubeconfig")
    pulumi_cli.command = lambda action, ws, bins, **kw: [sys.executable, driver, mode, str(ws.root), ws.stack]
    try:
        pulumi_cli.invoke("up", ws, {"pulumi": root / "bin"})
    except pulumi_cli.Interrupted as exc:
        done, left = exc.halt.said()
        print(json.dumps({"how": exc.halt.how, "done": done, "left": left, "signum": exc.signum}))
        sys.exit(130)
    """)


def fake_engine(tmp_path: Path) -> tuple[Path, pulumi_workspace.Workspace]:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    ws = pulumi_workspace.Workspace(tmp_path / "ws", "s1", tmp_path / "kubeconfig")
    for d in (ws.project, ws.home, ws.root / "bin"):
        d.mkdir(parents=True)
    ws.passphrase_file.write_text("x")
    pulumi = ws.root / "bin" / "pulumi"
    pulumi.write_text(f"#!{sys.executable}\n{PULUMI}")
    pulumi.chmod(0o755)
    return driver, ws


@pytest.mark.slow  # two processes and their signals: about 1.3 s
def test_ctrl_c_lets_pulumi_cancel_itself_and_says_only_what_it_checked(tmp_path):
    driver, ws = fake_engine(tmp_path)
    (tmp_path / "invoker.py").write_text(INVOKER)
    proc = subprocess.Popen([sys.executable, str(tmp_path / "invoker.py"), str(driver), "graceful", str(ws.root)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        plugin = int(wait_for(lambda: (ws.root / "ready").is_file() and (ws.root / "ready").read_text(), 20))
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the command's group, not the driver's
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    said = json.loads(out)
    assert (said["how"], said["signum"], said["left"]) == ("cancelled", signal.SIGINT, []), said
    assert said["done"][0].startswith("pulumi up of s1 cancelled by Pulumi itself in ")
    assert said["done"][1:] == ["its state was saved", "the stack is not locked"]
    assert "pulumi up of s1 is cancelling" in err and "Traceback" not in err
    assert (ws.root / "sigints").read_text() == "1"  # one SIGINT reached the driver: Pulumi's first, a cancel
    assert not (ws.root / "cancel.args").exists()    # nothing to cancel: Pulumi had unlocked
    assert pulumi_cli.locks(ws) == [] and pulumi_cli.processes(ws) == {}
    assert not harness.alive(plugin)
    assert not (ws.root / "up.tmp").exists()          # the run's TMPDIR


@pytest.mark.slow  # each step's grace: about 2 s
def test_a_cli_that_ignores_the_cancel_is_terminated_then_killed_and_its_lock_and_plugin_go(tmp_path):
    driver, ws = fake_engine(tmp_path)
    engine_command = pulumi_cli.command
    try:
        pulumi_cli.command = lambda action, ws, bins, **kw: [sys.executable, str(driver), "stubborn", str(ws.root),
                                                         ws.stack]
        proc, _ = pulumi_cli.start("up", ws, {"pulumi": ws.root / "bin"})
    finally:
        pulumi_cli.command = engine_command
    try:
        plugin = int(wait_for(lambda: (ws.root / "ready").is_file() and (ws.root / "ready").read_text(), 20))
        halt = pulumi_cli.stop(proc, "up", ws, {"pulumi": ws.root / "bin"}, grace=0.5, terminate_grace=0.5,
                           plugin_grace=0.3, echo=lambda m: None)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (halt.how, halt.rc) == ("killed", -signal.SIGKILL)
    assert (ws.root / "sigints").read_text() == "2"  # Pulumi's cancel, then its terminate, then SIGKILL
    assert list(halt.killed) == [plugin] and not harness.alive(plugin)
    assert (ws.root / "cancel.args").read_text() == "cancel --yes --non-interactive --stack s1"
    assert halt.unlocked and halt.locked == [] and pulumi_cli.locks(ws) == []
    done, left = halt.said()
    assert done[1:] == [f"killed the engine processes it left running (pid {plugin})",
                        "removed the lock it left on the stack (pulumi cancel)", "the stack is not locked"]
    assert left == ["what pulumi up of s1 was changing when it was killed may be missing from the stack's state "
                    "(Pulumi says so on the next run; a refresh reconciles it)"]
    assert not (ws.root / "up.tmp").exists()


def test_the_closing_line_says_what_is_kept_running_and_claims_nothing_more():
    procs.forget()
    try:
        procs.cleaned("pulumi up of s1 cancelled by Pulumi itself in 2 s")
        procs.kept("the local cluster (`dynamo-lab down s1 --local` stops it)")
        assert procs.interrupted_message() == (
            "interrupted; pulumi up of s1 cancelled by Pulumi itself in 2 s; still running, as it should: the local "
            "cluster (`dynamo-lab down s1 --local` stops it); nothing else it started is left running")
        procs.left_behind("the stack's lock (a1.json): `cancel`")
        assert procs.interrupted_message().endswith("stops it); NOT removed: the stack's lock (a1.json): `cancel`")
    finally:
        procs.forget()


@pytest.mark.process
def test_local_cluster_down_does_not_count_the_command_that_started_it_as_the_cluster(tmp_path):
    """`python3 dev.py local-cluster down --state DIR` (or sudo) names the directory too, as its parent."""
    state = tmp_path / "state"
    wrapper = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[2:]).returncode)"
    done = subprocess.run([sys.executable, "-c", wrapper, str(state), sys.executable, "-m", "dynamo_lab",
                           "local-cluster", "down", "--state", str(state)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "local-cluster: down; nothing left running\n", "")


# ---- the cluster tier: a real SIGINT to `dynamo-lab up STACK --local` ----

# Pulumi's rows as the driver prints them (non-interactive display, --color never): a preview's
# ` +  kubernetes:core/v1:Namespace NAME create`, an update's `... creating (0s)`.
# Tries at landing a Ctrl-C inside the preview, which on a busy machine can end between two looks.
ATTEMPTS = 3
PREVIEW_ROW = re.compile(r"^\s*\+\s+kubernetes:\S+\s+\S+\s+create\b", re.M)
CREATING_ROW = re.compile(r"^\s*\+\s+kubernetes:\S+\s+\S+\s+creating\b", re.M)


@pytest.fixture
def local_home(engine_bins, cluster_bins, tmp_path_factory):
    """A local root of its own (DYNAMO_LAB_CACHE), its cluster-tools the built ones (hard links:
    the same files, so the same sha256 and owner), and a TMPDIR to find what is left there. The
    cluster `up` starts there is stopped at the end whatever happened. Under tmp_path_factory, not
    tmp_path: pytest (tmp_path_retention_policy = "failed") removes a tmp_path whose test body
    passed, even when this teardown's check of leftovers then fails, taking the cluster's state and
    logs with it; a session that fails keeps the factory's directories."""
    tmp_path = tmp_path_factory.mktemp("local-home")
    try:
        upstream.locate()
    except upstream.UpstreamUnavailable as exc:
        pytest.skip(f"the DynamoGraphDeployment CRD is unavailable ({exc}): {upstream.HOW}")
    cache = tmp_path / "cache"
    cache.mkdir()
    subprocess.run(["cp", "-al", str(tools.cache_root(dict(os.environ))), str(cache / "cluster-tools")], check=True)
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "DYNAMO_LAB_CACHE": str(cache), "TMPDIR": str(tmp_path / "tmp")}
    yield env, cache / "local", tmp_path / "tmp"
    state = cache / "local" / "cluster"
    if harness.leftovers(state):
        subprocess.run([sys.executable, "-m", "dynamo_lab", "down", STACK, "--local"], cwd=ROOT, env=env,
                       capture_output=True, timeout=300)
        harness.stop(state)
    assert harness.leftovers(state) == []


def dynamo_lab(env, *args: str) -> subprocess.Popen:
    """`dynamo-lab ARGS` as a terminal runs it: a process group of its own, the terminal's
    foreground job, to which Ctrl-C sends SIGINT."""
    return subprocess.Popen([sys.executable, "-m", "dynamo_lab", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def ctrl_c_of_up(env, ws: pulumi_workspace.Workspace, tmpdir: Path, ready) -> Optional[str]:
    """`dynamo-lab up STACK --local` sent Ctrl-C once `ready()`: it exits 130 after Pulumi's own
    cancel, with no traceback and nothing of the engine left (no process, no lock, no temporary
    file); its last line, the one that says what it left. None when the action Pulumi was running
    had already ended when the signal came (then the command still exits 130, leaves nothing and
    says the action stopped)."""
    proc = dynamo_lab(env, "up", STACK, "--local")
    try:
        deadline = time.monotonic() + 300
        # Asked every 20 ms, not wait_for's half second: a preview of a dozen objects can finish
        # within half a second of its first row, and the Ctrl-C must land inside it.
        while not (ready() or proc.poll() is not None):
            assert time.monotonic() < deadline, "not ready within 300 s"
            time.sleep(0.02)
        assert proc.poll() is None, "it ended before it could be interrupted:\n" + proc.communicate()[1][-3000:]
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in out + err, (out + err)[-3000:]
    assert pulumi_cli.processes(ws) == {} and pulumi_cli.locks(ws) == [] and list(tmpdir.iterdir()) == []
    last = err.strip().splitlines()[-1]
    if "received; cancelling" not in out:
        # The action had ended when the signal came (its summary is there): what the command says
        # must still be true, and the caller tries again to land inside the action.
        assert "Resources:" in out and " stopped in " in last, (out + err)[-3000:]
        return None
    return last


def log_shows(path: Path, row: re.Pattern) -> bool:
    return path.is_file() and bool(row.search(path.read_text(errors="replace")))


@pytest.mark.cluster
def test_ctrl_c_of_up_local_in_its_preview_then_in_its_creates_leaves_nothing_and_the_next_up_works(local_home):
    env, local, tmpdir = local_home
    ws = pulumi_workspace.Workspace(local / "stacks" / STACK, STACK, local / "cluster" / "kubeconfig")
    cluster_kept = (f"still running, as it should: the local cluster ({{}}; `dynamo-lab down {STACK} --local` "
                    "stops it); nothing else it started is left running")

    # 1. In the preview: Pulumi cancels; nothing was deployed, so nothing is saved.
    t0 = time.monotonic()
    started = "this command started it"
    for _ in range(ATTEMPTS):
        last = ctrl_c_of_up(env, ws, tmpdir, lambda: log_shows(ws.root / "preview.log", PREVIEW_ROW)
                            and not (ws.root / "up.log").exists())
        if last is not None:
            break
        started = "it was running before"  # the first try's command started the cluster and kept it
    assert last is not None, f"the preview ended before Ctrl-C reached it in all {ATTEMPTS} tries"
    assert re.fullmatch(rf"interrupted; pulumi preview of {STACK} cancelled by Pulumi itself in \d+ s \(it starts "
                        r"no new step and finishes those in flight\); the stack is not locked; "
                        + re.escape(cluster_kept.format(started)), last), last
    assert harness.status_of(local / "cluster").ready and harness.leftovers(local / "cluster")

    # 2. In the update, once a create has started: Pulumi finishes the creates in flight, saves
    # what it made and unlocks the stack.
    last = ctrl_c_of_up(env, ws, tmpdir, lambda: log_shows(ws.root / "up.log", CREATING_ROW))
    assert last is not None, "the update ended before Ctrl-C reached it"
    assert re.fullmatch(rf"interrupted; pulumi up of {STACK} cancelled by Pulumi itself in \d+ s \(it starts no "
                        r"new step and finishes those in flight\); its state was saved; the stack is not locked; "
                        + re.escape(cluster_kept.format("it was running before")), last), last
    assert not (ws.root / "up.tmp").exists()

    # 3. The next `up` needs no `pulumi cancel`; 4. `down` leaves nothing.
    done = subprocess.run([sys.executable, "-m", "dynamo_lab", "up", STACK, "--local"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "locked" not in done.stdout + done.stderr
    done = subprocess.run([sys.executable, "-m", "dynamo_lab", "down", STACK, "--local"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.strip().endswith("nothing left running"), done.stderr[-3000:]
    assert harness.leftovers(local / "cluster") == [] and pulumi_cli.processes(ws) == {}
    assert not ws.root.exists() and list(tmpdir.iterdir()) == []
    print(f"four runs in {time.monotonic() - t0:.0f} s")
