"""The live preview's role (deploy/live-preview-reader.yaml) at a real Kubernetes 1.34 API server.

The file is applied as docs/reviewing.md says (after the stacks' namespaces exist), and the API
server itself is asked what its ServiceAccount may do: by SubjectAccessReview, by the account's own
SelfSubjectRulesReview, and by requests made with a token of the account (what `kubectl create
token` gives the kubeconfig). It may read the kinds the stacks declare in their namespaces and the
cluster-wide ones; it may not read a Secret anywhere, read anything else, or write anything. And
the real engine and provider (Pulumi CLI v3.274.1, provider 4.25.0) preview a deployed stack with
that kubeconfig, as the live-preview job does, a change to its Secret included.
tests/test_live_preview_reader.py checks offline that the rules name exactly the kinds the stacks render.
"""

from __future__ import annotations

import os
import subprocess
from typing import Optional

import pytest
import yaml

from dynamo_lab.local_cluster import pulumi_cli, pulumi_workspace
from dynamo_lab.local_cluster.api import STRICT, Api
from dynamo_lab.local_cluster.standin import GraphReady
from dynamo_lab.local_cluster.state import write_private
from infra.plan import plan
from tests.helpers import ROOT, STACKS, loaded, wait_for

pytestmark = pytest.mark.cluster

READER = ROOT / "deploy" / "live-preview-reader.yaml"
DOCS = [d for d in yaml.safe_load_all(READER.read_text()) if d]
(SA,) = [d["metadata"] for d in DOCS if d["kind"] == "ServiceAccount"]
USER = f"system:serviceaccount:{SA['namespace']}:{SA['name']}"
GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{SA['namespace']}", "system:authenticated"]
RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC = f"/apis/{RBAC_GROUP}/v1"
COLLECTIONS = {  # the kinds the file holds -> their collection
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ClusterRole": f"{RBAC}/clusterroles",
    "ClusterRoleBinding": f"{RBAC}/clusterrolebindings",
    "RoleBinding": RBAC + "/namespaces/{ns}/rolebindings",
}
READ, WRITE = ("get", "list", "watch"), ("create", "update", "patch", "delete", "deletecollection")
BOUND = sorted(d["metadata"]["namespace"] for d in DOCS if d["kind"] == "RoleBinding")


def _granted(role: str) -> list[tuple[str, str]]:
    """(API group, resource) of every rule of the file's ClusterRole `role`."""
    rules = next(d["rules"] for d in DOCS if d["kind"] == "ClusterRole" and d["metadata"]["name"] == role)
    return [(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]]


NAMESPACED, CLUSTER_WIDE = _granted("dynamo-lab-live-preview"), _granted("dynamo-lab-live-preview-cluster")
# Kinds the stacks do not declare, which the account must not read either: what the operator makes
# from a graph (pods, deployments), and what other tenants keep.
UNDECLARED = [("", "pods"), ("", "pods/log"), ("apps", "deployments"), ("", "serviceaccounts"),
              (RBAC_GROUP, "roles"), ("", "events")]


@pytest.fixture(scope="module")
def cluster(cluster_bins, tmp_path_factory, request):
    """A local cluster with the DynamoGraphDeployment CRD when it can be had (the resource names
    are then checked against it too), else without: authorization does not need the CRD."""
    from dynamo_lab.local_cluster import harness

    try:
        crd_dir = request.getfixturevalue("dgd_crd_dir")
    except pytest.skip.Exception:
        crd_dir = None
    state = tmp_path_factory.mktemp("cluster") / "state"
    with harness.running(state, cluster_bins, crd_dir=crd_dir) as handle:
        yield handle, crd_dir is not None
    assert harness.leftovers(state) == []


def _post(api: Api, collection: str, obj: dict) -> int:
    code, body = api.call("POST", f"{collection}?{STRICT}", obj)
    assert code in (200, 201, 409), f"POST {collection} {obj['metadata']['name']}: {code} {body}"
    return code


@pytest.fixture(scope="module")
def role(cluster):
    """(admin API, the account's API, whether the CRD is there): the stacks' namespaces made as
    their first `up` makes them, the file applied, a Secret and a ConfigMap in each bound namespace
    and one more Secret elsewhere, and a token of the account."""
    handle, with_crd = cluster
    admin = handle.api()
    for stack in STACKS:
        for ns in plan(loaded(stack)).of_kind("Namespace"):
            _post(admin, "/api/v1/namespaces", ns.manifest)
    for doc in DOCS:  # in the file's order, as `kubectl apply -f` sends them
        assert doc["kind"] in COLLECTIONS, f"{doc['kind']}: no collection known for it here"
        _post(admin, COLLECTIONS[doc["kind"]].format(ns=doc["metadata"].get("namespace")), doc)
    for ns in BOUND:
        _post(admin, f"/api/v1/namespaces/{ns}/secrets",
              {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tenant-secret", "namespace": ns},
               "stringData": {"HF_TOKEN": "not-a-token"}})
        _post(admin, f"/api/v1/namespaces/{ns}/configmaps",
              {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe", "namespace": ns},
               "data": {"a": "b"}})
    _post(admin, "/api/v1/namespaces/kube-system/secrets",
          {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "another-tenants", "namespace": "kube-system"},
           "stringData": {"token": "not-a-token"}})
    code, body = admin.call("POST", f"/api/v1/namespaces/{SA['namespace']}/serviceaccounts/{SA['name']}/token",
                            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                             "spec": {"expirationSeconds": 3600}})
    assert code == 201, body
    account = Api(handle.server, body["status"]["token"], handle.state_dir.ca)
    # RBAC's authorizer reads the bindings from its informers: wait until it has them.
    wait_for(lambda: account.call("GET", f"/api/v1/namespaces/{BOUND[0]}/configmaps")[0] == 200, timeout=30)
    return admin, account, with_crd


def _may(admin: Api, verb: str, group: str, resource: str, namespace: str = "", name: Optional[str] = None) -> bool:
    """The API server's SubjectAccessReview answer for the account."""
    res, _, sub = resource.partition("/")
    attrs = {"verb": verb, "group": group, "resource": res, "subresource": sub, "namespace": namespace}
    if name:
        attrs["name"] = name
    code, body = admin.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                             "spec": {"user": USER, "groups": GROUPS, "resourceAttributes": attrs}})
    assert code == 201, body
    return bool(body["status"].get("allowed"))


def test_the_account_reads_the_declared_kinds_in_the_stacks_namespaces_and_cluster_wide(role):
    admin, _, _ = role
    refused = [(verb, g, r, ns) for ns in BOUND for g, r in NAMESPACED for verb in READ
               if not _may(admin, verb, g, r, ns)]
    refused += [(verb, g, r, "") for g, r in CLUSTER_WIDE for verb in READ if not _may(admin, verb, g, r)]
    assert refused == []
    assert _may(admin, "get", "nvidia.com", "dynamographdeployments", BOUND[0], name="same-server")
    # The namespaced kinds only in the stacks' namespaces: a ConfigMap of kube-system is not the stacks'.
    assert not [(g, r) for g, r in NAMESPACED if _may(admin, "list", g, r, "kube-system") or _may(admin, "list", g, r)]


def test_the_account_reads_no_secret_anywhere(role):
    admin, _, _ = role
    where = [*BOUND, "kube-system", "default", SA["namespace"], ""]  # "": across all namespaces
    allowed = [(verb, ns, name) for ns in where for verb in READ for name in (None, "hf-token")
               if not (verb != "get" and name) and _may(admin, verb, "", "secrets", ns, name)]
    assert allowed == []


def test_the_account_writes_nothing_and_reads_nothing_else(role):
    admin, _, _ = role
    kinds = [*NAMESPACED, *CLUSTER_WIDE, ("", "secrets"), *UNDECLARED]
    allowed = [(verb, g, r, ns) for ns in (BOUND[0], "") for g, r in kinds for verb in WRITE
               if _may(admin, verb, g, r, ns)]
    allowed += [(verb, g, r) for g, r in UNDECLARED for verb in READ if _may(admin, verb, g, r, BOUND[0])]
    # Nor any way around it: a token for itself or another account, impersonation, granting roles.
    around = [("create", "", "serviceaccounts/token"), ("impersonate", "", "users"),
              ("impersonate", "", "serviceaccounts"), ("bind", RBAC_GROUP, "clusterroles"),
              ("escalate", RBAC_GROUP, "clusterroles"), ("*", "*", "*")]
    allowed += [v for v in around if _may(admin, *v, BOUND[0]) or _may(admin, *v)]
    assert allowed == []


def test_what_the_account_itself_is_told_it_may_do(role):
    """SelfSubjectRulesReview, as the account: its rules in each bound namespace and in one it is not
    bound in. Beside the kinds the file grants there are only Kubernetes' defaults for every
    authenticated user (system:basic-user: asking about itself)."""
    _, account, _ = role
    self_review = {("authorization.k8s.io", "selfsubjectaccessreviews"),
                   ("authorization.k8s.io", "selfsubjectrulesreviews"), ("authentication.k8s.io", "selfsubjectreviews")}
    for ns, granted in [*((ns, {*NAMESPACED, *CLUSTER_WIDE}) for ns in BOUND), ("kube-system", set(CLUSTER_WIDE))]:
        code, body = account.call("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                                  {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                                   "spec": {"namespace": ns}})
        assert code == 201, body
        reads, other = set(), []
        for rule in body["status"]["resourceRules"]:
            pairs = {(g, r) for g in rule["apiGroups"] for r in rule.get("resources", [])}
            if sorted(rule["verbs"]) == sorted(READ) and not rule.get("resourceNames"):
                reads |= pairs
            elif not (rule["verbs"] == ["create"] and pairs <= self_review):
                other.append(rule)
        assert (reads, other) == (granted, []), ns


def _get(api: Api, path: str) -> tuple[int, object]:
    """GET, again while the API server answers 429: a list of a CRD just established can be refused
    with "storage is (re)initializing" (retryAfterSeconds 1) while its watch cache starts, as seen
    here with Kubernetes 1.34; clients retry it."""
    answer: list = []
    wait_for(lambda: answer.append(api.call("GET", path)) or answer[-1][0] != 429, timeout=30)
    return answer[-1]


def test_requests_with_the_accounts_token_get_what_the_reviews_say(role):
    """The kubeconfig's view: real requests with the account's token."""
    _, account, with_crd = role
    ns = BOUND[0]
    status = {path: _get(account, path)[0] for path in [
        f"/api/v1/namespaces/{ns}/configmaps", f"/api/v1/namespaces/{ns}/configmaps/probe",
        f"/apis/batch/v1/namespaces/{ns}/jobs", "/api/v1/namespaces", "/api/v1/persistentvolumes",
        "/apis", "/version",  # discovery, which the provider reads first
        f"/api/v1/namespaces/{ns}/secrets", f"/api/v1/namespaces/{ns}/secrets/tenant-secret", "/api/v1/secrets",
        "/api/v1/namespaces/kube-system/secrets/another-tenants", f"/api/v1/namespaces/{ns}/pods",
        "/api/v1/namespaces/kube-system/configmaps"]}
    assert status == {path: (403 if "secrets" in path or "pods" in path or "kube-system" in path else 200)
                      for path in status}, status
    # Authorized, so the API server looks for the resource: 200 with the CRD, 404 without it; never 403.
    code, body = _get(account, f"/apis/nvidia.com/v1beta1/namespaces/{ns}/dynamographdeployments")
    assert code == (200 if with_crd else 404), body
    code, _ = account.call("POST", f"/api/v1/namespaces/{ns}/configmaps",
                           {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "written", "namespace": ns}})
    assert code == 403
    code, _ = account.call("POST", f"/api/v1/namespaces/{ns}/configmaps?dryRun=All",
                           {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "written", "namespace": ns}})
    assert code == 403  # not even the server-side dry run: `pulumi preview` falls back to the inputs


def _served(admin: Api, group: str) -> dict[str, bool]:
    """The resources the API server serves in `group` (its preferred version): name -> namespaced."""
    if group == "":
        path = "/api/v1"
    else:
        code, body = admin.call("GET", f"/apis/{group}")
        if code == 404:
            return {}
        path = f"/apis/{group}/{body['preferredVersion']['version']}"
    code, body = admin.call("GET", path)
    assert code == 200, body
    return {r["name"]: r["namespaced"] for r in body["resources"]}


def test_every_rule_names_a_resource_the_api_server_serves_at_the_scope_it_is_bound_at(role):
    admin, _, with_crd = role
    wrong = []
    for (group, resource), namespaced in [*((k, True) for k in NAMESPACED), *((k, False) for k in CLUSTER_WIDE)]:
        served = _served(admin, group)
        if group == "nvidia.com" and not with_crd:
            continue  # checked where the CRD can be had (DYNAMO_LAB_UPSTREAM_DIR)
        if served.get(resource) is not namespaced:
            wrong.append((group, resource, served.get(resource)))
    assert wrong == []
    if not with_crd:
        pytest.skip("the DynamoGraphDeployment CRD is unavailable: its resource name was not checked here")


def _pulumi(ws: pulumi_workspace.Workspace, bins, *args: str) -> None:
    """The workspace's own Pulumi CLI, as a user at that stack would run it."""
    env = pulumi_workspace.cli_env(ws, pulumi_workspace.passphrase(ws), os.environ)
    subprocess.run([str(bins["pulumi"] / "pulumi"), *args, "--stack", ws.stack, "--non-interactive"],
                   cwd=ws.project, env=env, check=True, capture_output=True, text=True, timeout=120)


def test_pulumi_preview_with_the_accounts_kubeconfig_shows_a_secrets_change_without_reading_it(
        role, cluster, engine_bins, tmp_path):
    """What the live preview does, with the role's access: a stack deployed (with its hf-token
    Secret) by an admin, then previewed by the real engine and provider with a kubeconfig holding
    the account's token, after a change to the token and to the graph. It succeeds; the Secret's
    change is shown (from the state: the provider may not read it), the graph's too; nothing else
    changes, and no token value is printed."""
    admin, account, with_crd = role
    handle, _ = cluster
    if not with_crd:
        pytest.skip("the stacks' graphs need the DynamoGraphDeployment CRD, unavailable here")
    stack, ns = "same-server", "dynamo-lab-same-server"
    ws = pulumi_workspace.Workspace(tmp_path / "ws", stack, handle.kubeconfig)
    assert pulumi_cli.invoke("preview", ws, engine_bins).rc == 0  # the workspace and its stack, made
    _pulumi(ws, engine_bins, "config", "set", "--secret", "dynamo-lab:hfToken", "token-one-deployed")
    with GraphReady(admin):
        up = pulumi_cli.invoke("up", ws, engine_bins)
    assert up.rc == 0, up.output[-4000:]
    assert admin.call("GET", f"/api/v1/namespaces/{ns}/secrets/hf-token")[0] == 200

    config = yaml.safe_load(handle.kubeconfig.read_text())
    config["users"] = [{"name": config["users"][0]["name"], "user": {"token": account.token}}]
    reader = tmp_path / "reader.kubeconfig"
    write_private(reader, yaml.safe_dump(config))
    _pulumi(ws, engine_bins, "config", "set", "--secret", "dynamo-lab:hfToken", "token-two-previewed")
    doc = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    (prefill,) = [w for w in doc["config"]["dynamo-lab:workers"] if w["name"] == "prefill"]
    prefill["replicas"] = 1
    changed = tmp_path / f"Pulumi.{stack}.yaml"
    changed.write_text(yaml.safe_dump(doc, sort_keys=False))

    preview = pulumi_cli.invoke("preview", pulumi_workspace.Workspace(ws.root, stack, reader), engine_bins,
                            stack_file=changed, diff=True)
    assert preview.rc == 0, preview.output[-6000:]
    ops: dict[tuple[str, str], set[str]] = {}
    for step in preview.result["steps"]:
        if step["op"] != "same":
            ops.setdefault((step["type"], step["name"]), set()).add(step["op"])
    # The provider replaces a Secret whose data changes (provider 4.25.0, provider/pkg/provider/diff.go,
    # forceNewProperties: .type, .stringData, .data, unless enableSecretMutable); its preview reads
    # nothing of it either way. The graph is updated in place.
    secret = ops.pop(("kubernetes:core/v1:Secret", "graph-hf-token"), set())
    assert secret and secret <= {"replace", "create-replacement", "delete-replaced"}, (secret, ops)
    assert ops.pop(("kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment", "graph-dgd"), None) == {"update"}, ops
    # The provider's kubeconfig changed user, not cluster: an update of it at most, never a replace.
    assert all(t.startswith("pulumi:providers:") and o == {"update"} for (t, _), o in ops.items()), ops
    assert "graph-hf-token" in preview.result["stdout"] and "~ replicas" in preview.result["stdout"]
    assert "token-one-deployed" not in preview.output and "token-two-previewed" not in preview.output
    assert "Traceback" not in preview.output
