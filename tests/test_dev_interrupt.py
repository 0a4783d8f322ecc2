"""dev.py on Ctrl-C (SIGINT to its process group, as a terminal sends it), SIGTERM and SIGHUP: it
lets the command it runs finish its cleanup, passes SIGTERM/SIGHUP on, and ends with 130 (128 + the
signal) and no traceback. Its installs are stubbed out: dev.py's own code runs, up to its
`if __name__ == "__main__"` block, with `sync` returning a stand-in for the environment's Python."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT

# Each test runs dev.py as a process of its own and signals it: the slow tier's (pyproject.toml's markers).
pytestmark = pytest.mark.process

DEV = ROOT / "dev.py"
# The command dev.py runs: it takes 0.5 s to clean up after SIGINT or SIGTERM, longer than the
# 0.25 s subprocess.run gives a child before killing it.
CHILD = textwrap.dedent(f"""\
    #!{sys.executable}
    import signal, sys, time
    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    try:
        print("child: ready", file=sys.stderr, flush=True)
        time.sleep(60)
    except KeyboardInterrupt:
        time.sleep(0.5)
        print("child: cleaned up", file=sys.stderr, flush=True)
        sys.exit(130)
    """)
# dev.py as `python3 dev.py ARGS` runs it, with its installs replaced (SYNC: what `sync` does).
HARNESS = textwrap.dedent("""\
    import sys
    path, sync = sys.argv[1], sys.argv[2]
    source = open(path).read()
    body, main_block = source.split('\\nif __name__ == "__main__":', 1)
    dev = {"__name__": "dev", "__file__": path}
    exec(compile(body, path, "exec"), dev)
    def fake_sync(*args, **kwargs):
        if sync == "interrupt":
            raise KeyboardInterrupt
        return sync
    dev["sync"] = fake_sync
    sys.argv = [path, "predict", "same-server"]
    exec(compile('if __name__ == "__main__":' + main_block, path, "exec"), {**dev, "__name__": "__main__"})
    """)


def _dev(tmp_path, sync: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HARNESS, str(DEV), sync], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


@pytest.fixture
def child(tmp_path):
    path = tmp_path / "python"
    path.write_text(CHILD)
    path.chmod(0o755)
    return str(path)


def _when_ready(proc: subprocess.Popen) -> None:
    line = proc.stderr.readline()
    assert line == "child: ready\n", line + proc.stderr.read()


@pytest.mark.parametrize("to_group, sig, code", [
    (True, signal.SIGINT, 130),   # Ctrl-C in a terminal: dev.py and the command both get it
    (False, signal.SIGTERM, 143),  # `kill` of dev.py: passed on
    (False, signal.SIGHUP, 129),
])
def test_dev_py_lets_the_command_clean_up_and_ends_without_a_traceback(tmp_path, child, to_group, sig, code):
    proc = _dev(tmp_path, child)
    _when_ready(proc)
    if to_group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert err == "child: cleaned up\n" and proc.returncode == code, (proc.returncode, err)


def test_ctrl_c_while_installing_ends_with_130_and_no_traceback(tmp_path):
    proc = _dev(tmp_path, "interrupt")
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, "dev.py: interrupted\n")


def test_a_reader_that_stops_early_gets_no_traceback_from_dev_py():
    # `python3 dev.py --help | head -1`: the reader is gone before the help is written.
    proc = subprocess.run(f"{sys.executable} {DEV} --help | true", shell=True, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
