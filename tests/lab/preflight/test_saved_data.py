"""The saved-data format docs/preflight.md documents: the command that writes it, and what preflight
says of a file that is not one."""

from __future__ import annotations

import pytest

from dynamo_lab.preflight import cluster_data
from infra.config.schema import ClusterTarget
from tests.helpers import ROOT
from tests.lab.preflight.saved_lab import (
    LAB,
    preflight,
)

# --- The saved-data format docs/preflight.md documents ----------------------------------------------------


def test_the_preflight_page_documents_the_command_whose_output_the_code_reads():
    readme = (ROOT / "docs" / "preflight.md").read_text()
    command = cluster_data.save_command(ClusterTarget(context="dynamo-lab"))
    assert command in readme
    assert command == ("{ kubectl --context dynamo-lab version -o json; kubectl --context dynamo-lab get "
                       "nodes,namespaces,deployments,customresourcedefinitions,validatingwebhookconfigurations,"
                       "mutatingwebhookconfigurations,storageclasses -A -o json; } > cluster.json")
    assert "python3 dev.py preflight cross-server --from cluster.json" in readme
    # The lab's file is what that command writes: the version, then one List of those kinds.
    version, listing = cluster_data.documents(LAB.read_text(), str(LAB))
    assert set(version) >= {"clientVersion", "serverVersion"} and listing["kind"] == "List"
    kinds = {i["kind"] for i in listing["items"]}
    assert kinds == {"Node", "Namespace", "Deployment", "CustomResourceDefinition"}
    assert kinds <= set(cluster_data.RESOURCES.values())


def test_the_save_command_reads_the_stacks_own_kubeconfig_and_writes_elsewhere():
    target = ClusterTarget(context="my lab", kubeconfig="~/.kube/lab.yaml")
    where = "--kubeconfig ~/.kube/lab.yaml --context 'my lab'"
    assert cluster_data.save_command(target) == (
        f"{{ kubectl {where} version -o json; kubectl {where} get {','.join(cluster_data.RESOURCES)} -A -o json; }}"
        " > cluster.json")  # never over the kubeconfig it reads


@pytest.mark.parametrize("content, message", [
    ("", "no server version in it"),
    ("{not json", "not JSON at line 1"),
    ('{"clientVersion": {"gitVersion": "v1.34.1"}}\n{"kind": "List", "items": []}', "no server version in it"),
    ('{"serverVersion": {"gitVersion": "v1.34.1"}}\n{"kind": "List", "items": []}', "no Node objects in it"),
])
def test_a_file_that_is_not_saved_cluster_data_is_exit_2(capsys, tmp_path, content, message):
    path = tmp_path / "cluster.json"
    path.write_text(content)
    code, out, err = preflight(capsys, "cross-server", str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: dynamo-lab preflight: {path}: {message}") and err.count("\n") == 1


def test_a_missing_file_is_exit_2(capsys, tmp_path):
    code, out, err = preflight(capsys, "cross-server", str(tmp_path / "nope.json"))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: dynamo-lab preflight: cannot read {tmp_path / 'nope.json'}:")
