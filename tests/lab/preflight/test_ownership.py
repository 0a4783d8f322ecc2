"""Preflight's checks of what is already installed: the Kubernetes version the chart declares,
another Dynamo operator, leftover webhooks and CRDs, and the namespaces (free, or already this
stack's)."""

from __future__ import annotations

import json
import re
from typing import Callable, Optional

from tests.lab.preflight.saved_lab import (
    DATA,
    LAB,
    does_not_fit,
    old_server,
    preflight,
    problems,
    report_for,
    saved,
)


def test_an_old_server_is_refused_by_the_charts_kube_version(capsys, tmp_path):
    code, out, _ = preflight(capsys, "cross-server", saved(tmp_path, old_server))
    assert code == 1 and does_not_fit(out, "cross-server", 1)
    assert problems(out) == [(
        "cluster: kubernetes version: the server is v1.29.15; the dynamo-platform chart declares kubeVersion "
        ">=1.30.0-0 (its CRDs rely on the validation ratcheting Kubernetes 1.30 turned on), so Helm refuses to "
        "install it",
        "Upgrade the cluster to a Kubernetes version within that range (the lab runs v1.34)")]
    assert re.search(r"^kubernetes version\s+FAILS\s+v1.29.15 is NOT within >=1.30.0-0", out, re.MULTILINE)


def _second_operator(version, items):
    items += json.loads((DATA / "other-dynamo.json").read_text())["items"]


def test_a_second_operator_is_refused_while_this_stack_manages_the_platform(capsys, tmp_path):
    code, out, _ = preflight(capsys, "kv-routing", saved(tmp_path, _second_operator))
    assert code == 1 and does_not_fit(out, "kv-routing", 1)
    ((problem, fix),) = problems(out)
    assert problem == (
        "platform: dynamo operator: a Dynamo operator is already installed (Deployment "
        "dynamo-cloud/dynamo-platform-dynamo-operator-controller-manager; Helm release dynamo-platform in "
        "dynamo-cloud; webhooks ValidatingWebhookConfiguration/dynamo-platform-dynamo-operator-validating, "
        "MutatingWebhookConfiguration/dynamo-platform-dynamo-operator-mutating; conversion webhook of "
        "dynamocomponentdeployments.nvidia.com, dynamographdeployments.nvidia.com); this stack would install a "
        "second cluster-wide one (release dynamo-platform in dynamo-system), and the two would fight over the same "
        "CRDs and admission webhooks")
    assert fix == ("Uninstall it (`helm uninstall dynamo-platform -n dynamo-cloud`), or use it from this stack: "
                   "`pulumi config set --path platform.manage false --stack kv-routing`")
    assert re.search(r"^dynamo operator\s+FAILS\s+another installation in dynamo-cloud$", out, re.MULTILINE)


def test_with_platform_management_off_the_installed_operator_is_used(tmp_path):
    path = saved(tmp_path, _second_operator)
    report = report_for("kv-routing", path, lambda c: c.update(platform={"manage": False}))
    assert report.fits, report.problems
    (operator,) = [c for c in report.checks if c.name == "dynamo operator"]
    assert operator.detail == "uses the operator in dynamo-cloud (platform.manage: false)"
    # ... and without one installed, there is nothing to use.
    report = report_for("kv-routing", str(LAB), lambda c: c.update(platform={"manage": False}))
    (problem,) = report.problems
    assert problem.problem == ("platform.manage is false, so this stack relies on an installed operator, but no "
                               "Dynamo operator is installed")


def test_leftover_dynamo_webhooks_without_an_operator_are_found(tmp_path):
    def leftovers(version, items):
        items += [i for i in json.loads((DATA / "other-dynamo.json").read_text())["items"]
                  if i["kind"].endswith("WebhookConfiguration")]

    report = report_for("cross-server", saved(tmp_path, leftovers))
    (problem,) = report.problems
    assert problem.check == "dynamo webhooks"
    assert "where no Dynamo operator runs" in problem.problem
    assert problem.fix == ("Delete them: kubectl delete validatingwebhookconfiguration "
                           "dynamo-platform-dynamo-operator-validating; kubectl delete mutatingwebhookconfiguration "
                           "dynamo-platform-dynamo-operator-mutating")


def test_dynamo_crds_owned_by_another_helm_release_are_refused(tmp_path):
    def crd_chart(version, items):
        crd = next(i for i in json.loads((DATA / "other-dynamo.json").read_text())["items"]
                   if i["metadata"]["name"] == "dynamographdeployments.nvidia.com")
        crd["spec"]["conversion"] = {"strategy": "None"}
        crd["metadata"]["annotations"] = {"meta.helm.sh/release-name": "dynamo-crds",
                                          "meta.helm.sh/release-namespace": "default"}
        items.append(crd)

    report = report_for("cross-server", saved(tmp_path, crd_chart))
    (problem,) = report.problems
    assert problem.problem.startswith("dynamographdeployments.nvidia.com belong to Helm release dynamo-crds in "
                                      "default")
    assert problem.fix.startswith("Uninstall that release (`helm uninstall dynamo-crds -n default`")




# --- Namespaces: free, or already this stack's ---------------------------------------------------


def _namespace(name: str, labels: Optional[dict] = None, phase: str = "Active") -> Callable:
    def add(version, items):
        items.append({"apiVersion": "v1", "kind": "Namespace", "status": {"phase": phase},
                      "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}}})
    return add


def test_the_graph_namespace_may_be_this_stacks_own(tmp_path):
    ours = _namespace("dynamo-lab-cross-server", {"dynamo-lab/stack": "cross-server"})
    report = report_for("cross-server", saved(tmp_path, ours))
    assert report.fits
    assert [c.detail for c in report.checks if c.name == "graph.namespace"] == [
        "dynamo-lab-cross-server is this stack's (dynamo-lab/stack=cross-server)"]


def test_a_graph_namespace_someone_else_made_is_refused(tmp_path):
    report = report_for("cross-server", saved(tmp_path, _namespace("dynamo-lab-cross-server")))
    (problem,) = report.problems
    assert problem.problem == ("namespace dynamo-lab-cross-server exists and is not this stack's (no "
                               "dynamo-lab/stack label): `pulumi up` would take it over, and `pulumi destroy` would "
                               "delete it with everything in it")
    assert problem.fix.endswith("`kubectl label namespace dynamo-lab-cross-server dynamo-lab/stack=cross-server`")


def test_a_platform_namespace_another_stack_owns_points_at_platform_manage(tmp_path):
    theirs = _namespace("dynamo-system", {"dynamo-lab/stack": "kv-routing"})
    report = report_for("cross-server", saved(tmp_path, theirs))
    (problem,) = report.problems
    assert problem.where == "platform.namespace"
    assert problem.fix.startswith("Let stack kv-routing own the platform and use it from this one: `pulumi config "
                                  "set --path platform.manage false --stack cross-server`")


def test_turning_platform_management_off_under_other_stacks_graphs_is_refused(tmp_path):
    # cross-server installed the platform; kv-routing's graph relies on it. Uninstalling the operator
    # now would leave kv-routing's DynamoGraphDeployment with a finalizer nobody removes.
    def edit(version, items):
        _namespace("dynamo-system", {"dynamo-lab/stack": "cross-server"})(version, items)
        _namespace("dynamo-lab-kv-routing", {"dynamo-lab/stack": "kv-routing"})(version, items)
    path = saved(tmp_path, edit)
    off = {"platform": {"manage": False}}
    problem = next(p for p in report_for("cross-server", path, lambda c: c.update(off)).problems
                   if p.check == "dynamo operator removal")
    assert "`pulumi up` would uninstall the operator while other stacks' graph namespaces remain: " \
           "dynamo-lab-kv-routing (stack kv-routing)" in problem.problem
    assert problem.fix.startswith("Destroy those stacks first (`pulumi destroy --stack kv-routing`)")
    # Without another stack's graph there is nothing to strand.
    alone = saved(tmp_path, _namespace("dynamo-system", {"dynamo-lab/stack": "cross-server"}))
    assert all(p.check != "dynamo operator removal"
               for p in report_for("cross-server", alone, lambda c: c.update(off)).problems)


def _pod_security_row(report) -> str:
    (detail,) = [c.detail for c in report.checks if c.name == "pod security"]
    return detail


def test_preflight_says_which_pod_security_level_the_graph_namespace_will_enforce_and_why(tmp_path):
    assert _pod_security_row(report_for("cross-server", str(LAB))) == (
        "dynamo-lab-cross-server will enforce baseline (`pulumi up` labels it): the model cache's preparation "
        "step runs as root (restricted refuses it, baseline allows it); it does not exist yet")
    pvc = report_for("cross-server", str(LAB), lambda c: c.update(modelCache={"mode": "off"}))
    assert _pod_security_row(pvc).startswith("dynamo-lab-cross-server will enforce restricted (`pulumi up` labels "
                                             "it): every pod of the stack meets restricted")
    ours = _namespace("dynamo-lab-cross-server", {"dynamo-lab/stack": "cross-server",
                                                  "pod-security.kubernetes.io/enforce": "restricted"})
    assert _pod_security_row(report_for("cross-server", saved(tmp_path, ours))).endswith("it enforces restricted now")
    unlabelled = _namespace("dynamo-lab-cross-server", {"dynamo-lab/stack": "cross-server"})
    assert "no Pod Security label now" in _pod_security_row(report_for("cross-server", saved(tmp_path, unlabelled)))


def test_a_terminating_namespace_must_be_gone_first(tmp_path):
    gone = _namespace("dynamo-lab-cross-server", {"dynamo-lab/stack": "cross-server"}, "Terminating")
    (problem,) = report_for("cross-server", saved(tmp_path, gone)).problems
    assert problem.problem == "namespace dynamo-lab-cross-server is being deleted"
