"""The node cache directory is judged as the node sees it: `<modelCache.hostPath>/dynamo-lab-cache.<graph
namespace>` joined and normalized, the directory the PersistentVolume (or the pods' hostPath) and the
pre-pull's root step really use. Whatever the namespace, its last component is one only dynamo-lab
uses; whatever the spelling or the mix of keys, it never lands in or above a directory of the node's
system, kubelet, container runtime, network plugin or Kubernetes distribution, and by default it lies
under one of a few data roots."""

from __future__ import annotations

import posixpath
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.errors import ConfigError
from infra.plan import plan
from tests.helpers import examples, loaded, refused

F = "Pulumi.cross-server.yaml"
# The directories the issue names, written out here on their own (not read from the code under
# test): kubeadm, the kubelet, k3s/RKE2, containerd, CRI-O, Docker, CNI, and the system's.
NODE_OWNED = ("/etc/kubernetes", "/var/lib/kubelet", "/var/lib/rancher", "/etc/rancher", "/var/lib/containerd",
              "/run/containerd", "/var/lib/containers", "/etc/crio", "/var/lib/docker", "/etc/cni", "/opt/cni",
              "/var/lib/cni", "/proc", "/sys", "/dev", "/etc", "/usr", "/bin", "/boot", "/root", "/var/run", "/run",
              "/var/spool", "/var/lib/sudo")


def _edit(host_path: str, namespace: Optional[str] = None, roots: Optional[list[str]] = None, mode="nodeVolume"):
    def edit(c: dict[str, Any]) -> None:
        c["modelCache"] = {"mode": mode, "hostPath": host_path, **({"allowedRoots": roots} if roots else {})}
        if namespace is not None:
            c["graph"] = {"namespace": namespace}
    return edit


def _message(edit) -> str:
    return str(refused("cross-server", edit))


def _node_directories(edit) -> set[str]:
    """Every node directory the stack's plan mounts: the PersistentVolumes' and the pods' hostPaths."""
    p = plan(loaded("cross-server", edit))
    found = set()
    for o in p.kubernetes:
        spec = o.manifest.get("spec", {})
        if o.manifest["kind"] == "PersistentVolume":
            found.add(spec["hostPath"]["path"])
        pods = [spec["template"]["spec"]] if o.manifest["kind"] == "Job" else [
            c["podTemplate"]["spec"] for c in spec.get("components", [])]
        found |= {v["hostPath"]["path"] for pod in pods for v in pod.get("volumes", []) if "hostPath" in v}
    return found


def _inside_or_above(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree + "/") or tree.startswith(path.rstrip("/") + "/")


# --- a namespace never names a directory of the node's ------------------------------------------

@pytest.mark.parametrize("host_path, roots, namespace, deployed", [
    # With allowedRoots widened, <hostPath>/<namespace> was the node's own: ~/bin (on the user's
    # PATH), sudo's timestamps, the kubelet's state. The cache's last component names the project.
    ("/home/ubuntu", ["/home/ubuntu"], "bin", "/home/ubuntu/dynamo-lab-cache.bin"),
    ("/var/lib", ["/var/lib"], "sudo", "/var/lib/dynamo-lab-cache.sudo"),
    ("/var/lib/", ["/var"], "kubelet", "/var/lib/dynamo-lab-cache.kubelet"),
    ("//var//lib", ["/"], "containerd", "/var/lib/dynamo-lab-cache.containerd"),
    ("/", ["/"], "etc", "/dynamo-lab-cache.etc"),
    ("/", ["/"], "opt", "/dynamo-lab-cache.opt"),
])
@pytest.mark.parametrize("mode", ["nodeVolume", "hostPath"])
def test_whatever_the_namespace_the_directory_is_one_only_dynamo_lab_uses(host_path, roots, namespace, deployed,
                                                                           mode):
    assert _node_directories(_edit(host_path, namespace, roots, mode)) == {deployed}


# --- a directory of the node's anywhere in the joined path ----------------------------------------

@pytest.mark.parametrize("host_path, namespace, final, why", [
    ("/var/lib/rancher", "k3s", "/var/lib/rancher/dynamo-lab-cache.k3s", "It is inside /var/lib/rancher, which "
                                                                           "belongs to the Kubernetes distribution"),
    ("/var/lib//rancher/", "rke2", "/var/lib/rancher/dynamo-lab-cache.rke2", "It is inside /var/lib/rancher"),
    ("/var/lib/./rancher/.", "k3s", "/var/lib/rancher/dynamo-lab-cache.k3s", "It is inside /var/lib/rancher"),
    ("/var/lib/kubelet", "pods", "/var/lib/kubelet/dynamo-lab-cache.pods", "It is inside /var/lib/kubelet, which "
                                                                            "belongs to the kubelet"),
    ("/var/lib/containerd/", None, "/var/lib/containerd/dynamo-lab-cache.dynamo-lab-cross-server",
     "It is inside /var/lib/containerd, which belongs to containerd"),
    ("//var//lib/containers", None, "/var/lib/containers/dynamo-lab-cache.dynamo-lab-cross-server",
     "It is inside /var/lib/containers, which belongs to CRI-O"),
    ("/var/lib/docker/volumes", None, "/var/lib/docker/volumes/dynamo-lab-cache.dynamo-lab-cross-server",
     "It is inside /var/lib/docker, which belongs to Docker"),
    ("/var/lib/cni", None, "/var/lib/cni/dynamo-lab-cache.dynamo-lab-cross-server",
     "It is inside /var/lib/cni, which belongs to the network plugin"),
    ("/opt/cni", None, "/opt/cni/dynamo-lab-cache.dynamo-lab-cross-server", "It is inside /opt/cni, which belongs to "
                                                                            "the network"),
    ("/opt//cni/./", None, "/opt/cni/dynamo-lab-cache.dynamo-lab-cross-server", "It is inside /opt/cni"),
    ("/etc/cni/net.d", None, "/etc/cni/net.d/dynamo-lab-cache.dynamo-lab-cross-server", "It is inside /etc"),
    ("/etc/kubernetes", None, "/etc/kubernetes/dynamo-lab-cache.dynamo-lab-cross-server", "It is inside /etc"),
    ("/run", "containerd", "/run/dynamo-lab-cache.containerd", "It is inside /run"),
    ("/var/run/", None, "/var/run/dynamo-lab-cache.dynamo-lab-cross-server", "It is inside /var/run"),
    # cron and at read /var/spool; sudo keeps its timestamps in /var/lib/sudo.
    ("/var/spool", "cron", "/var/spool/dynamo-lab-cache.cron", "It is inside /var/spool, which belongs to the "
                                                               "node's system"),
    ("/var/spool/cron/crontabs", None, "/var/spool/cron/crontabs/dynamo-lab-cache.dynamo-lab-cross-server",
     "It is inside /var/spool"),
    ("/var/lib/sudo", None, "/var/lib/sudo/dynamo-lab-cache.dynamo-lab-cross-server", "It is inside /var/lib/sudo"),
    ("/usr/local/share/models", None, "/usr/local/share/models/dynamo-lab-cache.dynamo-lab-cross-server",
     "It is inside /usr"),
    ("/root/.cache", None, "/root/.cache/dynamo-lab-cache.dynamo-lab-cross-server", "It is inside /root"),
    ("/proc", None, "/proc/dynamo-lab-cache.dynamo-lab-cross-server", "It is inside /proc"),
    ("/sys/", None, "/sys/dynamo-lab-cache.dynamo-lab-cross-server", "It is inside /sys"),
])
@pytest.mark.parametrize("roots", [None, ["/"]], ids=["default-roots", "roots-widened-to-everything"])
def test_a_directory_of_the_node_anywhere_in_the_path_is_refused_whatever_the_roots(host_path, namespace, final,
                                                                                     why, roots):
    msg = _message(_edit(host_path, namespace, roots))
    ns = namespace or "dynamo-lab-cross-server"
    assert msg.startswith(f"{F}: modelCache.hostPath: the node cache directory would be {final!r}, formed from "
                          f"modelCache.hostPath {host_path!r} and graph.namespace {ns!r}"), msg
    assert why in msg
    assert "the pre-pull's root step makes it group-writable (chgrp 0, chmod g+rwxs)" in msg
    assert msg.endswith("modelCache.allowedRoots cannot allow it. Give the cache a directory of its own, e.g. "
                        "hostPath: /var/lib/dynamo-lab/hf-cache")


@pytest.mark.parametrize("mode", ["nodeVolume", "hostPath"])
def test_both_node_cache_modes_are_judged(mode):
    assert "It is inside /var/lib/kubelet" in _message(_edit("/var/lib/kubelet", "kubelet", ["/"], mode=mode))


def test_a_cache_outside_the_data_roots_is_refused_and_names_the_key_that_widens_them():
    msg = _message(_edit("/home/me/models"))
    assert msg == (
        f"{F}: modelCache.hostPath: the node cache directory would be "
        "'/home/me/models/dynamo-lab-cache.dynamo-lab-cross-server', formed from modelCache.hostPath "
        "'/home/me/models' and graph.namespace 'dynamo-lab-cross-server' (default: dynamo-lab-<stack>). It is "
        "under none of the data roots a cache may use (/var/lib/dynamo-lab, /srv, /data, "
        "/mnt; modelCache.allowedRoots): the pre-pull's root step makes it group-writable (chgrp 0, chmod g+rwxs) "
        "and every worker's pod mounts it, so it must be a directory that holds nothing else of the node's. Write a "
        "hostPath under one of them, e.g. /var/lib/dynamo-lab/hf-cache, or add this disk's root to "
        "modelCache.allowedRoots")
    # The key it names widens them.
    assert _node_directories(_edit("/home/me/models", roots=["/home/me/"])) == {
        "/home/me/models/dynamo-lab-cache.dynamo-lab-cross-server"}


@pytest.mark.parametrize("host_path", ["/", "/var/lib", "/var", "/tmp"])
def test_a_shared_directory_is_outside_the_default_roots(host_path):
    assert "It is under none of the data roots a cache may use" in _message(_edit(host_path))


@pytest.mark.parametrize("root, why", [("models", "'models' is not an absolute path"),
                                       ("/data/../etc", "'/data/../etc' contains '..'")])
def test_an_allowed_root_must_be_an_absolute_path_without_dot_dot(root, why):
    assert _message(_edit("/data/hf", roots=["/data", root])).startswith(f"{F}: modelCache.allowedRoots[1]: {why}")


@pytest.mark.parametrize("host_path, deployed", [
    ("/data//hf/", "/data/hf/dynamo-lab-cache.dynamo-lab-cross-server"),
    ("/srv/./models/", "/srv/models/dynamo-lab-cache.dynamo-lab-cross-server"),
    ("/var/lib/dynamo-lab/hf-cache", "/var/lib/dynamo-lab/hf-cache/dynamo-lab-cache.dynamo-lab-cross-server"),
])
@pytest.mark.parametrize("mode", ["nodeVolume", "hostPath"])
def test_what_is_deployed_is_the_normalized_directory_that_was_judged(host_path, deployed, mode):
    assert _node_directories(_edit(host_path, mode=mode)) == {deployed}


# --- every combination: refused, or a directory of the cache's own -------------------------------

COMPONENTS = st.sampled_from(["", ".", "var", "lib", "opt", "etc", "run", "kubelet", "rancher", "k3s", "cni",
                              "containerd", "containers", "docker", "usr", "data", "srv", "mnt", "models", "hf",
                              "home", "ubuntu", "bin", "spool", "cron", "sudo"])
NAMESPACES = st.sampled_from([None, "kubelet", "containerd", "containers", "docker", "cni", "rancher", "etc", "opt",
                              "lib", "var", "run", "k3s", "models", "bin", "sudo", "cron", "spool"])
ROOTS = st.sampled_from([None, ["/"], ["/var"], ["/var/lib"], ["/opt"], ["/etc"], ["/run"], ["/home/ubuntu"],
                         ["/var/spool"]])


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(COMPONENTS, max_size=5), trailing=st.booleans(), namespace=NAMESPACES, roots=ROOTS,
       mode=st.sampled_from(["nodeVolume", "hostPath"]))
def test_no_accepted_combination_reaches_a_directory_of_the_node(parts, trailing, namespace, roots, mode):
    host_path = "/" + "/".join(parts) + ("/" if trailing else "")
    edit = _edit(host_path, namespace, roots, mode)
    try:
        deployed = _node_directories(edit)
    except ConfigError as exc:
        assert str(exc).startswith(f"{F}: modelCache.hostPath: the node cache directory would be ")
        return
    ns = namespace or "dynamo-lab-cross-server"
    expected = posixpath.normpath(f"{host_path}/dynamo-lab-cache.{ns}").replace("//", "/")
    assert deployed == {expected}
    assert posixpath.basename(expected) == f"dynamo-lab-cache.{ns}"
    for tree in NODE_OWNED:
        assert not _inside_or_above(expected, tree), (host_path, namespace, roots, expected, tree)
