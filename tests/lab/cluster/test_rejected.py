"""What the real engine does with an object the API server would refuse. No stack file can write
one (the schema has no such keys), so the program that sends it is this checkout's with one line
added to `infra/program.py`, in a copy made for the test; the engine runs that copy.

- A value the graph's CRD rejects (a component type `prefiller`): `up` fails with the API
  server's own words, as it would on the lab.
- A misspelled field of a typed core object (a Job's `backoffLimitt`): pulumi-kubernetes 4.25 drops
  it before anything reaches the API server (it is neither in the stack's state nor on the object,
  which gets Kubernetes' default backoffLimit, 6) and `up` succeeds without a word. So the engine
  cannot be the check for such a mistake: test_stacks.py sends every planned object with
  `fieldValidation=Strict`, where the same misspelling fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynamo_lab.local_cluster import pulumi_cli, pulumi_workspace
from dynamo_lab.local_cluster.standin import GraphReady
from infra.plan import plan
from tests.helpers import loaded
from tests.lab.cluster.test_deploy import LOCAL, copy_checkout, object_path, ok

pytestmark = pytest.mark.cluster

CRD_REJECTS = ("(dgd,) = [o for o in planned.objects if o.manifest['kind'] == 'DynamoGraphDeployment']; "
               "dgd.manifest['spec']['components'][1]['type'] = 'prefiller'")
MISSPELT = ("job = next(o for o in planned.objects if o.manifest['kind'] == 'Job'); "
            "job.manifest['spec']['backoffLimitt'] = job.manifest['spec'].pop('backoffLimit')")


def tree_with(tmp: Path, mutation: str) -> Path:
    """This checkout's files, with `mutation` applied to the plan in the program, before deploy."""
    tree = copy_checkout(tmp / "tree")
    program = tree / "infra" / "program.py"
    text = program.read_text()
    line = "    planned = plan(stack)\n"
    assert text.count(line) == 1, "the program's plan line moved: update this test"
    program.write_text(text.replace(line, line + f"    {mutation}\n"))
    return tree


def test_a_value_the_crd_rejects_fails_up_with_the_api_servers_words(lab_cluster_with_crd, engine_bins, tmp_path):
    tree = tree_with(tmp_path, CRD_REJECTS)
    ws = pulumi_workspace.Workspace(tmp_path / "ws", "cross-server", lab_cluster_with_crd.kubeconfig)
    with GraphReady(lab_cluster_with_crd.api()):
        inv = pulumi_cli.invoke("up", ws, engine_bins, program_root=tree, timeout=600)
    assert inv.rc == 1, inv.output[-4000:]
    assert "prefiller" in inv.output and "Unsupported value" in inv.output, inv.output[-4000:]
    assert "Traceback" not in inv.output
    ok(pulumi_cli.invoke("destroy", ws, engine_bins, program_root=tree))


def test_a_misspelled_typed_field_is_dropped_by_the_provider_not_refused(lab_cluster_with_crd, engine_bins, tmp_path):
    api = lab_cluster_with_crd.api()
    tree = tree_with(tmp_path, MISSPELT)
    ws = pulumi_workspace.Workspace(tmp_path / "ws", "cross-server", lab_cluster_with_crd.kubeconfig)
    with GraphReady(api):
        ok(pulumi_cli.invoke("up", ws, engine_bins, program_root=tree, timeout=600))
    job = next(o for o in plan(loaded("cross-server", LOCAL)).objects if o.manifest["kind"] == "Job")
    code, body = api.call("GET", object_path(job.manifest))
    assert code == 200 and "backoffLimitt" not in body["spec"] and body["spec"]["backoffLimit"] == 6, body["spec"]
    assert not any(b"backoffLimitt" in p.read_bytes() for p in ws.state.rglob("*.json"))
    ok(pulumi_cli.invoke("destroy", ws, engine_bins, program_root=tree))
