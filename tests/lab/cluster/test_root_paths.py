"""What runs as root trusts the paths above its own (root_paths.py): every directory from / down,
a binary run as the very file that was checked, and no making or removing through a symbolic link.
Each test builds its own tree in tmp_path; none touches the real cache."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from dynamo_lab.local_cluster import components, pulumi_cli, pulumi_driver, pulumi_workspace, root_paths
from dynamo_lab.local_cluster.api import LocalClusterError
from dynamo_lab.local_cluster.state import StateDir

# As root the owners allowed are root's; a test run as a user holds its own uid to the same rule.
ME = os.geteuid()
AS_ROOT = pytest.mark.skipif(ME != 0, reason="chown to another user needs root, whom the rule is for")


def _entry(root: Path, name: str, script: str) -> Path:
    """A cache entry as cluster-tools leaves it: bin/NAME, and a stamp recording its sha256."""
    binary = root / f"{name}-v1" / "bin" / name
    binary.parent.mkdir(parents=True)
    binary.write_text(script)
    binary.chmod(0o755)
    stamp = {"format": 2, "sha256": {name: hashlib.sha256(binary.read_bytes()).hexdigest()}}
    (binary.parent.parent / root_paths.STAMP).write_text(json.dumps(stamp))
    return binary


def _swap(binary: Path, script: str) -> None:
    """Another file renamed into the binary's place, as the owner of a directory above it could."""
    new = binary.with_name(".new")
    new.write_text(script)
    new.chmod(0o755)
    os.rename(new, binary)


def test_a_binary_swapped_after_it_was_opened_and_checked_is_not_what_runs(tmp_path):
    marker = tmp_path / "theirs-ran"
    binary = _entry(tmp_path / "cache", "etcd", "#!/bin/sh\necho checked\n")
    with root_paths.open_binary(binary, ME) as exe:
        _swap(binary, f"#!/bin/sh\ntouch {marker}\n")
        out = subprocess.run([str(binary)], executable=exe.exec_path, capture_output=True, text=True).stdout
    assert out == "checked\n" and not marker.exists()
    # Opened again now, it is refused: not what its stamp recorded.
    with pytest.raises(root_paths.Refused) as refused:
        root_paths.open_binary(binary, ME)
    assert f"{binary} has sha256" in str(refused.value) and f"rm -rf {binary.parent.parent}" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_component_whose_binary_was_swapped_since_cluster_tools_checked_it_is_not_started(tmp_path):
    marker = tmp_path / "theirs-ran"
    binary = _entry(tmp_path / "cache", "etcd", "#!/bin/sh\necho checked\nsleep 30\n")
    (tmp_path / "state" / "logs").mkdir(parents=True)

    class Etcd(components.ControlPlaneProcess):
        name = "etcd"

        def argv(self):
            return [str(self.bin_dir / "etcd")]

    started = Etcd(StateDir(tmp_path / "state"), binary.parent, None)
    started.start()
    try:
        deadline = time.monotonic() + 10
        while "checked" not in started.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.log.read_text() == "checked\n"
    finally:
        started.stop(1)
    assert started.binary is None  # closed once its process ended
    _swap(binary, f"#!/bin/sh\ntouch {marker}\n")
    swapped = Etcd(StateDir(tmp_path / "state"), binary.parent, None)
    with pytest.raises(LocalClusterError, match=rf"^etcd: not started: {binary} has sha256 .* fix: rm -rf "):
        swapped.start()
    assert swapped.process is None and not marker.exists()


@pytest.mark.parametrize("how", ["group-writable", pytest.param("another user's", marks=AS_ROOT)])
def test_a_binary_below_a_directory_another_user_could_change_is_refused_from_slash_down(tmp_path, how, monkeypatch):
    above = tmp_path / "home"
    binary = _entry(above / "cache", "kwok", "#!/bin/sh\n")
    if how == "group-writable":
        above.chmod(0o775)
        want, fix = f"{above} is group-writable (mode 0775)", f"chmod go-w {above}"
    else:
        monkeypatch.setenv("SUDO_UID", "1000")
        os.chown(above, 1000, 1000)
        want, fix = f"{above} is owned by uid 1000 (the user who ran sudo), not root", f"chown root {above}"
    with pytest.raises(root_paths.Refused) as refused:
        root_paths.open_binary(binary, ME)
    assert str(refused.value).startswith(want) and fix in str(refused.value)
    root_paths.open_binary(binary, None).close()  # a user's own tree: theirs to run


def test_a_sticky_directory_above_is_trusted_and_so_are_links_read_from_trusted_directories(tmp_path):
    """/tmp (1777): others can make entries there but not rename or remove one of root's, and every
    entry below on the path is held to the rule itself."""
    sticky = tmp_path / "tmp"
    binary = _entry(sticky / "cache", "kwok", "#!/bin/sh\necho ok\n")
    sticky.chmod(0o1777)
    root_paths.open_binary(binary, ME).close()
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "kwok").symlink_to(binary)   # as /usr/local/bin/tool -> ../lib/tool/bin/tool
    with root_paths.open_binary(tmp_path / "bin" / "kwok", ME) as exe:
        assert exe.path == binary
    sticky.chmod(0o1775)  # group-writable and sticky still passes; without the sticky bit it does not
    root_paths.open_binary(tmp_path / "bin" / "kwok", ME).close()
    sticky.chmod(0o0777)
    with pytest.raises(root_paths.Refused, match="is group- and other-writable"):
        root_paths.open_binary(tmp_path / "bin" / "kwok", ME)


@AS_ROOT
def test_a_sticky_directory_of_another_users_is_not(tmp_path):
    sticky = tmp_path / "tmp"
    binary = _entry(sticky / "cache", "kwok", "#!/bin/sh\n")
    sticky.chmod(0o1777)
    os.chown(sticky, 1000, 1000)   # its owner may rename any entry in it
    with pytest.raises(root_paths.Refused, match="is owned by uid 1000"):
        root_paths.open_binary(binary, ME)


def test_nothing_is_made_or_removed_through_a_symbolic_link_even_one_planted_after_the_check(tmp_path):
    victim = tmp_path / "victim"
    (victim / "stacks" / "foo").mkdir(parents=True)
    (victim / "stacks" / "foo" / "data").write_text("important")
    mine = tmp_path / "cache" / "local"
    (mine / "stacks" / "foo").mkdir(parents=True)
    assert root_paths.path_problem(mine / "stacks" / "foo", ME) is None    # checked: all real directories
    (mine / "stacks" / "foo").rmdir()
    (mine / "stacks").rmdir()
    (mine / "stacks").symlink_to(victim / "stacks")                       # then a link planted
    for act in (lambda: root_paths.remove_tree(mine / "stacks" / "foo", ME),
                lambda: root_paths.make_dirs(mine / "stacks" / "foo" / "new", ME)):
        with pytest.raises(root_paths.Refused, match=f"{mine / 'stacks'} is a symbolic link"):
            act()
    assert (victim / "stacks" / "foo" / "data").read_text() == "important"
    assert not (victim / "stacks" / "foo" / "new").exists()
    # The link itself, as the last component, is not removed through either, as a user or as root.
    for uid in (None, ME):
        with pytest.raises(root_paths.Refused, match="is a symbolic link"):
            root_paths.remove_tree(mine / "stacks", uid)
    assert (victim / "stacks" / "foo" / "data").is_file()


def test_make_dirs_makes_each_missing_directory_with_its_mode_whatever_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        root_paths.make_dirs(tmp_path / "a" / "b", ME, mode=0o755)
    finally:
        os.umask(old)
    assert (tmp_path / "a" / "b").stat().st_mode & 0o777 == 0o755
    assert root_paths.remove_tree(tmp_path / "a", ME) and not (tmp_path / "a").exists()
    assert root_paths.remove_tree(tmp_path / "a", ME) is False   # nothing there: nothing to do


def _engine(tmp_path: Path, log: Path) -> dict[str, Path]:
    """Cache entries of a pulumi that logs its arguments and installs a --file plugin by copying it,
    and of a provider."""
    pulumi = _entry(tmp_path / "cache", "pulumi", f"""#!/bin/sh
echo "$@" >> {log}
if [ "$1" = version ]; then echo v3.274.1; exit 0; fi
while [ $# -gt 0 ]; do
  if [ "$1" = --file ]; then
    d="$PULUMI_HOME/plugins/resource-kubernetes-v{pulumi_workspace.PROVIDER_VERSION}"
    mkdir -p "$d" && cp "$2" "$d/pulumi-resource-kubernetes" && chmod 755 "$d/pulumi-resource-kubernetes"
  fi
  shift
done
""")
    provider = _entry(tmp_path / "cache", "pulumi-resource-kubernetes", "#!/bin/sh\necho provider 4.25.0\n")
    return {"pulumi": pulumi.parent, "pulumi-resource-kubernetes": provider.parent}


def test_the_engine_runs_the_cli_and_installs_the_provider_as_opened_and_checked(tmp_path):
    log = tmp_path / "pulumi-ran"
    bins = _engine(tmp_path, log)
    ws = pulumi_workspace.Workspace(tmp_path / "ws", "s", tmp_path / "kubeconfig")
    env = {**os.environ, "PULUMI_HOME": str(ws.home)}
    pulumi_workspace.install_provider(ws, bins, env)
    (line,) = log.read_text().splitlines()
    assert line.startswith(f"plugin install resource kubernetes {pulumi_workspace.PROVIDER_VERSION} --reinstall "
                           "--file /proc/") and "/fd/" in line   # the provider's open file, not its path
    plugin = (ws.home / "plugins" / f"resource-kubernetes-v{pulumi_workspace.PROVIDER_VERSION}"
              / "pulumi-resource-kubernetes")
    provider = bins["pulumi-resource-kubernetes"] / "pulumi-resource-kubernetes"
    assert plugin.read_bytes() == provider.read_bytes()
    pulumi_workspace.install_provider(ws, bins, env)              # installed, the same bytes: not again
    assert len(log.read_text().splitlines()) == 1
    with root_paths.open_binary(bins["pulumi"] / "pulumi", ME) as cli:   # the Automation API's command
        command = pulumi_driver._checked_command(cli)
        assert command.command == cli.exec_path and str(command.version) == "3.274.1"
    # The provider swapped since its build: refused, and the CLI never runs.
    _swap(provider, "#!/bin/sh\necho theirs\n")
    with pytest.raises(root_paths.Refused, match=f"{provider} has sha256"):
        pulumi_workspace.install_provider(ws, bins, env)
    # `pulumi cancel` after a stopped run, with a CLI swapped since: not run.
    _swap(bins["pulumi"] / "pulumi", f"#!/bin/sh\necho theirs >> {log}\n")
    ws.project.mkdir(parents=True)
    ws.passphrase_file.write_text("p")
    pulumi_cli._cancel(ws, bins)
    assert "theirs" not in log.read_text()
