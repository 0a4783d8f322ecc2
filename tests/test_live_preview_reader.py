"""The live preview's role (deploy/live-preview-reader.yaml): it reads exactly the kinds the stacks
declare, no Secret, bound cluster-wide only for cluster-wide kinds, and the docs ship it."""

from __future__ import annotations

import json

import yaml

from tests.helpers import ROOT, STACKS

# --- The live preview's role: only what the stacks declare, no Secret ---------------------------

READER = ROOT / "deploy" / "live-preview-reader.yaml"
READ = ["get", "list", "watch"]


def _declared() -> dict[tuple[str, str], set[str]]:
    """(apiVersion, kind) -> the namespaces its objects go in ("" for a cluster-wide kind), over
    every shipped stack as shipped and with every optional part on (the golden renders' variants)."""
    from dynamo_lab import review, stack_files
    from infra.plan import HELM_RELEASE, load_stack, plan

    out: dict[tuple[str, str], set[str]] = {}
    for stack in STACKS:
        for variant in (None, *review.VARIANTS):
            raw, secrets = (stack_files.stack_config(stack, ROOT) if variant is None
                            else review._everything_on(stack, ROOT, review.VARIANTS[variant]))
            for o in plan(load_stack(stack, raw, secrets)).objects:
                if o.kind != HELM_RELEASE:  # Helm's, not a Kubernetes kind: previewed from its inputs and chart
                    out.setdefault(o.kind, set()).add(o.manifest["metadata"].get("namespace") or "")
    return out


def _resource(api_version: str, kind: str) -> tuple[str, str]:
    """(API group, resource) of a kind: Kubernetes' plural of its lower-cased name (the
    DynamoGraphDeployment CRD's `names.plural` follows it; the cluster tier asks the API server)."""
    lower = kind.lower()
    plural = lower[:-1] + "ies" if lower.endswith("y") else lower + ("es" if lower.endswith("s") else "s")
    return (api_version.rpartition("/")[0], plural)


def _reader_docs() -> list[dict]:
    return [d for d in yaml.safe_load_all(READER.read_text()) if d]


def _granted(role: dict) -> set[tuple[str, str]]:
    out = set()
    for rule in role["rules"]:
        assert set(rule) <= {"apiGroups", "resources", "verbs"}, rule  # no resourceNames, no nonResourceURLs
        assert rule["verbs"] == READ, rule
        out |= {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
    return out


def test_the_live_preview_role_reads_exactly_the_kinds_the_stacks_declare_and_no_secret():
    declared = _declared()
    assert ("v1", "Secret") in declared  # the hfToken Secret: declared, and still not readable
    docs = _reader_docs()
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    assert not [d for d in docs if d["kind"] == "Role"] and all("aggregationRule" not in r for r in roles.values())
    assert set(roles) == {"dynamo-lab-live-preview", "dynamo-lab-live-preview-cluster"}
    readable = {k: nss for k, nss in declared.items() if k != ("v1", "Secret")}
    wanted = {scope: {_resource(*k) for k, nss in readable.items() if (nss == {""}) == cluster}
              for scope, cluster in (("dynamo-lab-live-preview-cluster", True), ("dynamo-lab-live-preview", False))}
    for name, role in roles.items():
        assert _granted(role) == wanted[name], name
    every = json.dumps(docs)
    assert '"secrets"' not in every and '"*"' not in every


def test_the_live_preview_role_is_bound_cluster_wide_only_for_cluster_wide_kinds():
    docs = _reader_docs()
    (sa,) = [d for d in docs if d["kind"] == "ServiceAccount"]
    subject = [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"]}]
    assert sa["automountServiceAccountToken"] is False
    bindings = [d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert all(b["subjects"] == subject for b in bindings)
    assert [b["roleRef"]["name"] for b in bindings if b["kind"] == "ClusterRoleBinding"] == \
        ["dynamo-lab-live-preview-cluster"]
    namespaced = {b["metadata"]["namespace"] for b in bindings if b["kind"] == "RoleBinding"
                  and b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                       "name": "dynamo-lab-live-preview"}}
    assert len(namespaced) == len([b for b in bindings if b["kind"] == "RoleBinding"])
    # A RoleBinding in every namespace the stacks put a namespaced object in, and no other.
    assert namespaced == set().union(*(nss for nss in _declared().values() if nss != {""})) - {""}


def test_the_docs_ship_the_role_instead_of_a_read_everything_one():
    doc = (ROOT / "docs" / "reviewing.md").read_text()
    assert "deploy/live-preview-reader.yaml" in doc
    assert 'resources: ["*"]' not in doc and "resources: [*]" not in doc
    assert "deploy/live-preview-reader.yaml" in (ROOT / ".github" / "workflows" / "preview.yml").read_text()
