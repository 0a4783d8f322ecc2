"""Ctrl-C, SIGTERM and SIGHUP: every command ends saying what it did about what it had started, and
the shaped probe removes its network namespaces on each (and those an earlier run left) - checked
with stand-ins for `ip` and `tc` that keep their namespaces in a directory, so no root is needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dynamo_lab import cli
from tests.helpers import ROOT, run_cli

FAKE_IP = textwrap.dedent("""\
    #!/bin/sh
    # iproute2's `ip` for the probe's calls: namespaces are files in $FAKE_NET/ns; links never come up.
    echo "$*" >> "$FAKE_NET/log"
    if [ "$1" = netns ]; then
      case "$2" in
        add) touch "$FAKE_NET/ns/$3" ;;
        del) [ -e "$FAKE_NET/ns/$3" ] || { echo "Cannot remove namespace file" >&2; exit 1; }; rm "$FAKE_NET/ns/$3" ;;
        list) for f in "$FAKE_NET/ns"/*; do [ -e "$f" ] && echo "$(basename "$f") (id: 0)"; done ;;
      esac
    fi
    exit 0
    """)
# The probe as root would run it (the stand-ins need no root): a 1 Gbit/s shaped link.
PROBE_AS_ROOT = ("import os, sys\nos.geteuid = lambda: 0\nfrom dynamo_lab import cli\n"
                 "sys.exit(cli.main(['probe', 'local', '--bytes', '1Mi', '--link', '1gbit']))\n")


@pytest.fixture
def fake_net(tmp_path):
    net = tmp_path / "net"
    (net / "ns").mkdir(parents=True)
    (net / "log").touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, text in (("ip", FAKE_IP), ("tc", "#!/bin/sh\nexit 0\n")):
        (bin_dir / tool).write_text(text)
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "FAKE_NET": str(net), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return net, env


def _signal_while_waiting_for_the_link(net: Path, env: dict, sig: int) -> subprocess.CompletedProcess:
    """Start the shaped probe, and send `sig` once it waits for its veth to come up: after the
    namespaces exist, before the transfer (whose processes have always been stopped)."""
    proc = subprocess.Popen([sys.executable, "-c", PROBE_AS_ROOT], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while "link show" not in (net / "log").read_text():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.process
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_the_shaped_probe_removes_its_namespaces_on_every_signal(fake_net, sig):
    net, env = fake_net
    done = _signal_while_waiting_for_the_link(net, env, sig)
    assert sorted(p.name for p in (net / "ns").iterdir()) == [], done.stderr
    made = [line.split()[2] for line in (net / "log").read_text().splitlines() if line.startswith("netns add")]
    pid = made[0][len("dlprobe"):-1]
    assert made == [f"dlprobe{pid}i", f"dlprobe{pid}t"]
    assert done.returncode == 128 + sig, done.stderr
    assert done.stderr == (f"interrupted; removed network namespaces dlprobe{pid}i, dlprobe{pid}t; "
                           "nothing it started is left running\n")


@pytest.mark.process
def test_namespaces_an_earlier_probe_left_are_removed_at_start(fake_net):
    net, env = fake_net
    gone = 4_999_999  # above any pid_max: no such process
    alive = os.getpid()  # a running probe's namespaces stay
    for name in (f"dlprobe{gone}i", f"dlprobe{gone}t", f"dlprobe{alive}t", "dlprobe-mine", "other"):
        (net / "ns" / name).touch()
    done = _signal_while_waiting_for_the_link(net, env, signal.SIGTERM)
    assert sorted(p.name for p in (net / "ns").iterdir()) == sorted([f"dlprobe{alive}t", "dlprobe-mine", "other"])
    assert done.stderr.startswith(f"probe: removed network namespaces an earlier probe left behind: "
                                  f"dlprobe{gone}i, dlprobe{gone}t\n"), done.stderr


def test_ctrl_c_of_a_command_that_starts_nothing_says_nothing_was_left_running(monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "_predict", interrupted)
    done = run_cli("predict", "same-server")
    assert (done.returncode, done.stdout) == (130, "")
    assert done.stderr == "interrupted; it had started nothing, so nothing was left running\n"


@pytest.mark.parametrize("argv, option", [
    (["bench", "same-server", "--target", "twin", "--runs", "0"], "--runs"),
    (["bench", "same-server", "--target", "twin", "--runs", "-3"], "--runs"),
    (["probe", "local", "--bytes", "1Mi", "--repeats", "0"], "--repeats"),
    (["probe", "local", "--bytes", "1Mi", "--repeats", "-3"], "--repeats"),
    (["probe", "local", "--bytes", "1Mi", "--timeout", "0"], "--timeout"),
    (["probe", "local", "--bytes", "1Mi", "--timeout", "nan"], "--timeout"),
    (["twin", "same-server", "--seconds", "-1"], "--seconds"),
    (["bench", "same-server", "--target", "twin", "--prefix-types", "2,0"], "--prefix-types"),
])
def test_every_count_option_takes_only_a_positive_number(capsys, argv, option):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert f"argument {option}" in capsys.readouterr().err


def test_time_tests_runs_takes_only_a_positive_integer(capsys):
    from tests import time_fast_tier

    for bad in ("0", "-3"):
        with pytest.raises(SystemExit) as exit_:
            time_fast_tier.main(["--runs", bad])
        assert exit_.value.code == 2 and "argument --runs" in capsys.readouterr().err


def test_time_tests_says_how_fast_the_machine_was(monkeypatch, capsys):
    """Its report opens with the loop and the load average, taken before the runs, and closes with the
    loop again (no load average: after the runs it mostly counts them) before the median; pytest's
    runs are faked, this is about the report's form."""
    from tests import time_fast_tier

    monkeypatch.setattr(time_fast_tier, "REFERENCE_STEPS", 1000)
    ran = []

    def fake_run(cmd, **kwargs):
        ran.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout="3 passed in 0.01s\n", stderr="")

    monkeypatch.setattr(time_fast_tier.subprocess, "run", fake_run)
    assert time_fast_tier.main(["--runs", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(ran) == 2 and len(lines) == 5, lines
    assert lines[0].startswith("machine before: a 1,000-step Python loop took ") and ", load average " in lines[0]
    assert [line.split(":")[0] for line in lines[1:3]] == ["run 1", "run 2"], lines
    assert lines[3].startswith("machine after: a 1,000-step Python loop took ") and "load" not in lines[3], lines
    assert lines[4].startswith("fast tier on ") and "median" in lines[4], lines
