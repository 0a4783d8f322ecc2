"""`dynamo-lab advise --write` end to end on the local cluster: the real command line reads the
running cluster live (kwok's simulated lab nodes, read-only, as preflight does), writes its
recommended layout as Pulumi.advised.yaml in a copy of this checkout, and that file renders,
passes the live preflight and is deployed by the real engine (test_deploy.py says what is real),
held still and destroyed whole.

The stack files name the context `dynamo-lab`, which is the local cluster's kubeconfig context
(state.kubeconfig): the written file is deployed as advise wrote it, its cluster reached by
pointing KUBECONFIG at the local cluster's kubeconfig (the file's `kubernetes:kubeconfig` is
unset, so that is the lookup preflight, advise and the provider all make). The engine applies its
one local override, `platform.manage: false` (stack_overrides.LOCAL_OVERRIDES), the plan below too. A
cluster of its own: the deployed stack's pods and namespaces are what preflight reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dynamo_lab import stack_files
from dynamo_lab.local_cluster import pulumi_cli, pulumi_workspace, stack_overrides
from dynamo_lab.local_cluster.standin import GraphReady
from infra.plan import load_stack, plan
from tests.helpers import wait_for
from tests.lab.cluster.test_deploy import BESIDES, copy_checkout, object_path, ok, type_token

pytestmark = pytest.mark.cluster

BASE, NAME = "kv-routing", "advised"
WORKERS = "dynamo-lab:workers"
BENCHMARK, WORKLOAD = "dynamo-lab:benchmark", "dynamo-lab:workload"


def _cli(tree: Path, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m dynamo_lab ARGS` in the copy, as a user in the project directory runs it."""
    return subprocess.run([sys.executable, "-m", "dynamo_lab", *args], cwd=tree, capture_output=True, text=True,
                          env={**os.environ, "KUBECONFIG": str(kubeconfig)}, timeout=900)


def _deployed_plan(stack_file: Path):
    """The plan of the file as the engine deploys it (with its local override)."""
    doc = yaml.safe_load(stack_file.read_text())
    merged = stack_overrides.merge_config(doc["config"], stack_overrides.LOCAL_OVERRIDES)
    raw, secrets = stack_files.config_from_doc(merged)
    return plan(load_stack(NAME, raw, secrets))


def test_the_written_layout_renders_passes_preflight_deploys_holds_still_and_is_destroyed(
        lab_cluster_with_crd, engine_bins, tmp_path):
    cluster = lab_cluster_with_crd
    api = cluster.api()
    tree = copy_checkout(tmp_path / "tree")
    written = tree / f"Pulumi.{NAME}.yaml"

    # One point of the base's workload (prefix types 7, concurrency 8), not its eight: what this test
    # proves is the live read and the written file, not the search's breadth (the slow tier's advise
    # tests prove that). `advise kv-routing --from tests/data/preflight/lab.json` took 55 s of CPU (the
    # process and its pool) at the eight points, 18.6 s at this one (2026-12-06); at both, the first ranked
    # uses both GPU classes, so the deploy spans both nodes (asserted below).
    advised = _cli(tree, cluster.kubeconfig, "advise", BASE, "--prefix-types", "7", "--concurrency", "8",
                   "--json", "--write", written.name)
    assert advised.returncode == 0, (advised.stdout[-3000:], advised.stderr[-3000:])
    assert written.is_file() and f"wrote {written.name}" in advised.stderr, advised.stderr[-3000:]
    advice = json.loads(advised.stdout)
    assert advice["cluster"] == f"cluster context 'dynamo-lab' of {cluster.kubeconfig}", advice["cluster"]  # live
    assert not advice["left_out"], advice["left_out"]  # every GPU class of the base found its node
    # What --write writes: the first ranked (`recommended` too, unless it ties with the second).
    (winner,) = [c for c in advice["candidates"] if c["layout"] == advice["first"]]
    doc = yaml.safe_load(written.read_text())
    assert doc["config"][WORKERS] == winner["workers"], (doc["config"][WORKERS], winner)
    assert {w["gpuClass"] for w in winner["workers"]} == {"gpu-24gb", "gpu-8gb"}, winner["workers"]
    # Besides its workers, the file is the base's, with the workload it was advised for (given here):
    # the benchmark's point, and that point as the workload the sizing sizes for.
    written_config = doc["config"]
    for section, point in ((BENCHMARK, {"prefixTypes": [7], "concurrency": [8]}),
                           (WORKLOAD, {"prefixTypes": 7, "concurrency": 8})):
        assert {k: written_config[section].get(k) for k in point} == point, (section, written_config[section])
    base = yaml.safe_load((tree / f"Pulumi.{BASE}.yaml").read_text())["config"]
    others = (WORKERS, BENCHMARK, WORKLOAD)
    assert ({k: v for k, v in written_config.items() if k not in others}
            == {k: v for k, v in base.items() if k not in others})
    print(f"advise on the local cluster ({advice['nodes']}): {advice['first']}, {winner['workers']} "
          f"({advice['seconds']:.0f} s)")

    rendered = _cli(tree, cluster.kubeconfig, "render", NAME)
    assert rendered.returncode == 0 and "Traceback" not in rendered.stderr, rendered.stderr[-3000:]
    preflight = _cli(tree, cluster.kubeconfig, "preflight", NAME)
    assert preflight.returncode == 0, (preflight.stdout[-3000:], preflight.stderr[-3000:])
    assert f"Verdict: {NAME} fits this cluster." in preflight.stdout, preflight.stdout[-3000:]

    planned = _deployed_plan(written)
    steps = ({(type_token(o.kind), o.name) for o in planned.objects}
             | {(c.type, c.name) for c in planned.components})
    ws = pulumi_workspace.Workspace(tmp_path / "ws", NAME, cluster.kubeconfig)
    with GraphReady(api):
        up = ok(pulumi_cli.invoke("up", ws, engine_bins, stack_file=written))
    assert up["summary"] == {"create": len(steps) + BESIDES}, up["summary"]
    for o in planned.objects:
        assert api.call("GET", object_path(o.manifest))[0] == 200, o.name
    again = ok(pulumi_cli.invoke("preview", ws, engine_bins, stack_file=written))
    assert again["summary"] == {"same": len(steps) + BESIDES}, again["summary"]
    ok(pulumi_cli.invoke("destroy", ws, engine_bins))
    for o in planned.objects:
        wait_for(lambda o=o: api.call("GET", object_path(o.manifest))[0] == 404, 120)
