"""What the stacks' pods may do, checked against the rules of Pod Security `restricted` and
`baseline` (Kubernetes 1.34, "Pod Security Standards"), and the Pod Security level each namespace a
stack creates enforces.

The rules below are the standard's, written out (k8s.io/pod-security-admission v0.34.4, policy/
check_*.go): the mocks run no admission controller. The cluster tier's API server runs the real one
(tests/lab/cluster/test_example.py, test_stacks.py).
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Iterator

import pytest
import yaml

from infra import catalogue
from infra.manifests import security
from tests.helpers import DGD, JOB, ROOT, STACKS, everything_on, run_stack

NAMESPACE = "kubernetes:core/v1:Namespace"
ENFORCE = "pod-security.kubernetes.io/enforce"
# Volume types `restricted` allows (everything else, hostPath first of all, is refused).
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}
PVC = {"mode": "pvc", "pvc": {"storageClass": "nfs-client"}}


def _pods(run) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, pod spec) of every pod the stack declares: the graph's components and every Job."""
    (dgd,) = run.of_type(DGD)
    for comp in dgd.inputs["spec"]["components"]:
        yield f"component {comp['name']}", comp["podTemplate"]["spec"]
    for job in run.of_type(JOB):
        yield f"Job {job.name}", job.inputs["spec"]["template"]["spec"]


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """Where `pod` breaks Pod Security `restricted`: the checks the admission controller makes."""
    found = []
    sc = pod.get("securityContext", {})
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            found.append(key)
    for v in pod.get("volumes", []):
        kind = next(k for k in v if k != "name")
        if kind not in RESTRICTED_VOLUMES:
            found.append(f"volume {v['name']} is {kind}")
    if sc.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
        found.append("pod seccompProfile")
    for c in pod.get("initContainers", []) + pod["containers"]:
        csc = c.get("securityContext", {})
        if not csc.get("runAsNonRoot", sc.get("runAsNonRoot")):
            found.append(f"{c['name']}: runAsNonRoot")
        if csc.get("runAsUser", sc.get("runAsUser")) == 0:
            found.append(f"{c['name']}: runAsUser 0")
        if csc.get("allowPrivilegeEscalation") is not False:
            found.append(f"{c['name']}: allowPrivilegeEscalation")
        if csc.get("privileged"):
            found.append(f"{c['name']}: privileged")
        caps = csc.get("capabilities", {})
        if "ALL" not in caps.get("drop", []) or set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{c['name']}: capabilities")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            found.append(f"{c['name']}: hostPort")
    return found


def _namespaces(run) -> dict[str, dict[str, str]]:
    return {r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"] for r in run.of_type(NAMESPACE)}


@pytest.mark.parametrize("stack", STACKS)
def test_without_a_hostpath_cache_every_pod_meets_restricted_and_the_namespace_enforces_it(stack):
    for cache in (PVC, {"mode": "off"}):
        run = run_stack(stack, lambda c, cache=cache: (everything_on(stack)(c), c.update(modelCache=cache)))
        for where, pod in _pods(run):
            assert restricted_violations(pod) == [], (cache["mode"], where)
        assert _namespaces(run)[f"dynamo-lab-{stack}"][ENFORCE] == "restricted"


# What Pod Security baseline allows beyond restricted's rules: root, and these capabilities added.
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
ROOT_STEP = {"prepare-cache: runAsNonRoot", "prepare-cache: runAsUser 0", "prepare-cache: capabilities"}


@pytest.mark.parametrize("stack", STACKS)
def test_by_default_the_node_cache_keeps_every_pod_at_baseline_and_the_namespace_enforces_it(stack):
    run = run_stack(stack, everything_on(stack))
    for where, pod in _pods(run):
        # Only the cache's root preparation step is short of restricted, and baseline allows it.
        assert set(restricted_violations(pod)) <= ROOT_STEP, where
        for c in pod.get("initContainers", []):
            assert set(c["securityContext"]["capabilities"].get("add", [])) <= BASELINE_CAPABILITIES
    labels = _namespaces(run)[f"dynamo-lab-{stack}"]
    assert labels[ENFORCE] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"


@pytest.mark.parametrize("stack", STACKS)
def test_a_hostpath_cache_breaks_restricted_only_where_it_must_and_says_so(stack):
    run = run_stack(stack, lambda c: (everything_on(stack)(c), c.update(modelCache={"mode": "hostPath"})))
    allowed = {"volume model-cache is hostPath", *ROOT_STEP}
    for where, pod in _pods(run):
        assert set(restricted_violations(pod)) <= allowed, where
    # baseline already refuses a hostPath volume, so the namespace says privileged, explicitly.
    labels = _namespaces(run)[f"dynamo-lab-{stack}"]
    assert labels[ENFORCE] == "privileged"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"


# --- every shipped stack and example, in every golden variant ---------------------------------

BASELINE_SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem",
                "net.ipv4.tcp_wmem"}
HANDLERS = ("livenessProbe", "readinessProbe", "startupProbe")


def baseline_violations(pod: dict[str, Any]) -> list[str]:
    """Where `pod` breaks Pod Security `baseline` (v1.34): the twelve checks of that level in
    pod-security-admission v0.34.4 (appArmorProfile, capabilities_baseline, hostNamespaces,
    hostPathVolumes, hostPorts, hostProbesAndHostLifecycle, privileged, procMount, seLinuxOptions,
    seccompProfile_baseline, sysctls, windowsHostProcess)."""
    found = []
    sc = pod.get("securityContext", {})
    found += [key for key in ("hostNetwork", "hostPID", "hostIPC") if pod.get(key)]
    found += [f"volume {v['name']} is hostPath" for v in pod.get("volumes", []) if "hostPath" in v]
    found += [f"sysctl {x['name']}" for x in sc.get("sysctls", []) if x["name"] not in SAFE_SYSCTLS]
    for where, ctx in [("pod", sc)] + [(c["name"], c.get("securityContext", {}))
                                       for c in pod.get("initContainers", []) + pod["containers"]]:
        if ctx.get("seccompProfile", {}).get("type") == "Unconfined":
            found.append(f"{where}: seccompProfile Unconfined")
        if ctx.get("appArmorProfile", {}).get("type") == "Unconfined":
            found.append(f"{where}: appArmorProfile Unconfined")
        se = ctx.get("seLinuxOptions", {})
        if se.get("type", "") not in BASELINE_SELINUX_TYPES or se.get("user") or se.get("role"):
            found.append(f"{where}: seLinuxOptions")
        if ctx.get("windowsOptions", {}).get("hostProcess"):
            found.append(f"{where}: windowsOptions.hostProcess")
    for c in pod.get("initContainers", []) + pod["containers"]:
        csc = c.get("securityContext", {})
        if csc.get("privileged"):
            found.append(f"{c['name']}: privileged")
        if set(csc.get("capabilities", {}).get("add", [])) - BASELINE_CAPABILITIES:
            found.append(f"{c['name']}: capabilities beyond baseline's")
        if csc.get("procMount", "Default") != "Default":
            found.append(f"{c['name']}: procMount")
        if any(port.get("hostPort") for port in c.get("ports", [])):
            found.append(f"{c['name']}: hostPort")
        handlers = [c.get(h, {}) for h in HANDLERS] + list(c.get("lifecycle", {}).values())
        if any(h.get(kind, {}).get("host") for h in handlers for kind in ("httpGet", "tcpSocket")):
            found.append(f"{c['name']}: probe or lifecycle host")
    return found


def lowest_level(pods: list[dict[str, Any]]) -> str:
    """The lowest Pod Security level that admits every pod of `pods`."""
    if any(baseline_violations(pod) for pod in pods):
        return "privileged"
    return "baseline" if any(restricted_violations(pod) for pod in pods) else "restricted"


def test_the_level_rules_tell_the_levels_apart():
    # The rules above, on pods made to sit at each level: a checker that admitted everything would
    # pass every test below it.
    main = security.container({"name": "main"})
    pod = {"securityContext": security.pod(), "containers": [main]}
    assert lowest_level([pod]) == "restricted"
    prepare = {"name": "prepare-cache", "securityContext": dict(security.PREPARE_AS_ROOT)}
    assert lowest_level([{**pod, "initContainers": [prepare]}]) == "baseline"
    ipc_lock = {**main, "securityContext": {**security.CONTAINER,
                                            "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}}
    assert lowest_level([{**pod, "containers": [ipc_lock]}]) == "privileged"
    assert lowest_level([{**pod, "volumes": [{"name": "v", "hostPath": {"path": "/x"}}]}]) == "privileged"
    assert lowest_level([pod, {**pod, "hostNetwork": True}]) == "privileged"


# The golden renders, tests/golden/<stack>[.<variant>].yaml: every shipped stack and example, as
# rendered and with every optional part on in each model cache mode (dynamo_lab/review.py, VARIANTS;
# tests/lab/test_review.py keeps each one current). Read as files: a program test imports no lab code.
GOLDEN_DIR = ROOT / "tests" / "golden"
GOLDEN = sorted(p.name.removesuffix(".yaml") for p in GOLDEN_DIR.glob("*.yaml"))


@functools.cache
def _golden_docs(name: str) -> tuple[dict[str, Any], ...]:
    # libyaml's parser where PyYAML has it (the same documents, read ten times as fast: these files are
    # thousands of lines, each read by several tests); once per golden and process.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(d for d in yaml.load_all((GOLDEN_DIR / f"{name}.yaml").read_text(), Loader=loader) if d)


def _golden(name: str) -> list[dict[str, Any]]:
    return copy.deepcopy(list(_golden_docs(name)))


def test_the_goldens_cover_every_shipped_stack_and_example():
    stacks = {name.split(".")[0] for name in GOLDEN}
    assert stacks == {*catalogue.SHIPPED_STACKS, *catalogue.EXAMPLE_STACKS}
    assert all(sum(n.split(".")[0] == s for n in GOLDEN) == 5 for s in stacks), GOLDEN


def _golden_pods(docs: list[dict[str, Any]]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(namespace, where, pod spec) of every pod a render declares: each Job's, each graph component's."""
    for d in docs:
        meta = d.get("metadata", {})
        if d.get("kind") == "DynamoGraphDeployment":
            for comp in d["spec"]["components"]:
                yield meta["namespace"], f"component {comp['name']}", comp["podTemplate"]["spec"]
        elif "template" in d.get("spec", {}):
            yield meta["namespace"], f"{d['kind']} {meta['name']}", d["spec"]["template"]["spec"]


def _user(pod: dict[str, Any], c: dict[str, Any]) -> int | None:
    return c.get("securityContext", {}).get("runAsUser", pod.get("securityContext", {}).get("runAsUser"))


@pytest.mark.parametrize("golden", GOLDEN)
def test_no_container_adds_a_capability_its_user_cannot_hold(golden):
    # A capability added to a non-root container is not in its process's effective set: across
    # execve a non-root process keeps only ambient capabilities (capabilities(7)), which containerd's
    # CRI clears in every container (v2.2.0, internal/cri/server/container_create.go,
    # WithoutAmbientCaps; kubernetes/kubernetes#56374), and no_new_privs (allowPrivilegeEscalation
    # false) stops file capabilities too. Such an add grants nothing, yet costs the namespace a level.
    pods = list(_golden_pods(_golden(golden)))
    assert pods
    for _, where, pod in pods:
        for c in pod.get("initContainers", []) + pod["containers"]:
            added = c.get("securityContext", {}).get("capabilities", {}).get("add", [])
            uid = _user(pod, c)
            assert uid is not None, f"{where}/{c['name']}: no runAsUser, so whether it is root is the image's"
            assert not added or uid == 0, f"{where}/{c['name']} runs as uid {uid} yet adds {added}"


@pytest.mark.parametrize("golden", GOLDEN)
def test_each_namespace_enforces_the_lowest_level_that_admits_its_pods(golden):
    docs = _golden(golden)
    levels = {d["metadata"]["name"]: d["metadata"]["labels"][ENFORCE] for d in docs if d.get("kind") == "Namespace"}
    by_namespace: dict[str, list[dict[str, Any]]] = {}
    for ns, _, pod in _golden_pods(docs):
        by_namespace.setdefault(ns, []).append(pod)
    assert set(by_namespace) == {f"dynamo-lab-{golden.split('.')[0]}"}, "only the graph namespace's pods"
    for ns, pods in by_namespace.items():
        assert levels[ns] == lowest_level(pods), ns


def test_the_rdma_example_asks_no_more_than_its_model_cache_needs():
    # Its RDMA workers meet restricted; only the node cache's root step holds the namespace at
    # baseline, and without that step it enforces restricted.
    for variant, level in [("", "baseline"), (".everything-on-pvc", "restricted"), (".everything-on-off", "restricted"),
                           (".everything-on-hostpath", "privileged")]:
        docs = _golden("two-node-rdma" + variant)
        workers = [pod for _, where, pod in _golden_pods(docs) if where in ("component prefill", "component decode")]
        assert len(workers) == 2
        for pod in workers:
            assert [r for r in restricted_violations(pod) if "hostPath" not in r] == [], variant
            (main,) = pod["containers"]
            assert main["resources"]["limits"]["rdma/rdma_shared_device_a"] == "1", variant
        labels = {d["metadata"]["name"]: d["metadata"]["labels"] for d in docs if d.get("kind") == "Namespace"}
        assert labels["dynamo-lab-two-node-rdma"][ENFORCE] == level, variant


def test_every_namespace_carries_explicit_pod_security_labels(stack):
    for ns, labels in _namespaces(run_stack(stack)).items():
        assert labels[ENFORCE] in ("privileged", "baseline", "restricted"), ns
        assert labels[ENFORCE + "-version"] == "v1.34", ns
    assert _namespaces(run_stack(stack))["dynamo-system"][ENFORCE] == "baseline"


def test_only_the_graphs_pods_keep_a_service_account_token(stack):
    # The workers and frontend use Dynamo's Kubernetes discovery; no Job calls the API.
    for where, pod in _pods(run_stack(stack, everything_on(stack))):
        if where.startswith("Job"):
            assert pod["automountServiceAccountToken"] is False, where
        else:
            assert "automountServiceAccountToken" not in pod, where


def test_pulumi_waits_for_the_graph_to_be_ready_within_the_stacks_timeout(stack):
    (dgd,) = run_stack(stack, lambda c: c.update(graph={"readyTimeoutSeconds": 600})).of_type(DGD)
    assert dgd.inputs["metadata"]["annotations"] == {"pulumi.com/waitFor": "condition=Ready",
                                                     "pulumi.com/timeoutSeconds": "600"}


# The node cache directory's refusals, joined and normalized: tests/infra/config/test_node_cache_directory.py.


def test_a_dedicated_directory_is_accepted_and_each_stack_gets_its_own_under_it():
    for stack in STACKS:
        run = run_stack(stack, lambda c: c.update(modelCache={"hostPath": "/srv/models/hf"}))
        paths = {r.inputs["spec"]["hostPath"]["path"] for r in run.of_type("kubernetes:core/v1:PersistentVolume")}
        assert paths == {f"/srv/models/hf/dynamo-lab-cache.dynamo-lab-{stack}"}
        run = run_stack(stack, lambda c: c.update(modelCache={"mode": "hostPath", "hostPath": "/srv/models/hf"}))
        paths = {v["hostPath"]["path"] for _, pod in _pods(run) for v in pod.get("volumes", []) if "hostPath" in v}
        assert paths == {f"/srv/models/hf/dynamo-lab-cache.dynamo-lab-{stack}"}


NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def test_network_policies_are_opt_in_and_isolate_every_pod_both_ways(stack):
    # What each policy allows, flow by flow: tests/infra/manifests/test_network_flows.py.
    assert run_stack(stack).of_type(NETPOL) == []
    run = run_stack(stack, lambda c: c.update(graph={"networkPolicy": True}))
    policies = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in run.of_type(NETPOL)}
    assert policies[f"{stack}-default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
                                                 "ingress": [], "egress": []}
    # The labels the operator gives the frontend's pods.
    assert policies[f"{stack}-frontend-http"]["podSelector"] == {"matchLabels": {
        "nvidia.com/dynamo-component-type": "frontend", "nvidia.com/dynamo-graph-deployment-name": stack}}
    namespace = next(r for r in run.of_type(NAMESPACE) if r.inputs["metadata"]["name"] == f"dynamo-lab-{stack}")
    for r in run.of_type(NETPOL):
        assert r.inputs["metadata"]["namespace"] == f"dynamo-lab-{stack}"
        assert namespace.urn in r.dependencies


# --- the Hugging Face token: only what downloads from the Hub reads it ----------------------------

TOKEN = "hf_not_a_real_token"


def _token_readers(run) -> set[str]:
    """The pods whose containers read the token Secret ("component decode", "Job bench-job", ...)."""
    readers = set()
    for where, pod in _pods(run):
        for c in pod.get("initContainers", []) + pod["containers"]:
            refs = [e["secretRef"]["name"] for e in c.get("envFrom", []) if "secretRef" in e]
            refs += [e["valueFrom"]["secretKeyRef"]["name"] for e in c.get("env", []) if "valueFrom" in e]
            if refs:
                assert refs == ["hf-token"], where
                readers.add(where)
    return readers


@pytest.mark.parametrize("cache, downloads", [
    ({}, {"Job graph-model-cache-pull"}),  # nodeVolume, pre-pulled: the workers run Hub-offline
    ({"mode": "hostPath"}, {"Job graph-model-cache-pull"}),
    (PVC, {"Job graph-model-cache-pull"}),
    # No pre-pull, no cache: the workers download the model themselves, so they need it.
    ({"prePull": {"enabled": False}}, {"workers"}),
    ({"mode": "off"}, {"workers"}),
])
def test_the_token_reaches_only_what_downloads_from_the_hub(stack, cache, downloads):
    def edit(c):
        everything_on(stack)(c)
        c["hfToken"] = TOKEN
        c["modelCache"] = cache
    run = run_stack(stack, edit, ["dynamo-lab:hfToken"])
    workers = {f"component {name}" for name in _components(run) if name != "frontend"}
    pulls = {f"Job {r.name}" for r in run.of_type(JOB) if r.name.startswith("graph-model-cache-pull-")}
    # AIPerf fetches the served model's tokenizer from the Hub; the pre-pull Jobs download the model.
    expected = {"Job bench-job"} | (workers if "workers" in downloads else pulls)
    assert _token_readers(run) == expected
    assert ("workers" in downloads) == (pulls == set()), "a pre-pulled cache has its Jobs"
    for r in run.resources:
        assert TOKEN not in str(r.inputs) or r.type == "kubernetes:core/v1:Secret", r.name


def _components(run) -> dict[str, Any]:
    (dgd,) = run.of_type(DGD)
    return {c["name"]: c for c in dgd.inputs["spec"]["components"]}
