"""What the workflows keep between runs: the cluster tier's tools by their pins, handed to root before
the tier; the engine tier's downloads; what the engine preview restores and never writes."""

from __future__ import annotations

from tests.helpers import ROOT, workflow

# --- What the workflows keep between runs -------------------------------------------------------

def _cache_steps(job: dict) -> dict[str, dict]:
    return {step["with"]["path"].strip(): step for step in job["steps"]
            if step.get("uses", "").startswith("actions/cache@")}


def test_the_cluster_job_keeps_its_tools_by_their_pins_and_hands_them_to_root_before_the_tier():
    # A cold build is about 21 minutes of every run; the tools' versions live in tools.py and the
    # wrappers' go.mod/go.sum, how they are built in tool_build.py, so a key over them changes
    # exactly when a tool would be rebuilt.
    job = workflow("ci.yml")["jobs"]["cluster"]
    caches = _cache_steps(job)
    tools = caches["~/.cache/dynamo-lab/cluster-tools"]
    for pinned in ("tools/cluster/**/go.sum", "tools/cluster/**/go.mod", "dynamo_lab/local_cluster/tools.py",
                   "dynamo_lab/local_cluster/tool_build.py"):
        assert pinned in tools["with"]["key"], pinned
    assert any("go/pkg/mod" in path and "go-build" in path for path in caches)
    assert "~/.cache/uv" in caches
    names = [s.get("name", "") for s in job["steps"]]
    handed = names.index("Hand the restored tools to root")
    assert names.index(tools["name"]) < handed < names.index("Cluster tier")
    assert "chown -R root:root" in job["steps"][handed]["run"] and "go-w" in job["steps"][handed]["run"]
    tier = job["steps"][names.index("Cluster tier")]["run"]
    assert "HOME" in tier.split("--preserve-env=", 1)[1].split()[0].split(",")  # root reads the same cache


def test_the_engine_tier_runs_in_the_workflows_with_its_downloads_kept():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 dev.py test-engine" in ci
    job = workflow("ci.yml")["jobs"]["engine"]
    assert any("python3 dev.py test-engine" in s.get("run", "") for s in job["steps"])
    (uv,) = [s for p, s in _cache_steps(job).items() if p == "~/.cache/uv"]
    assert "tests/engine/requirements.txt" in uv["with"]["key"]


def test_the_engine_preview_restores_what_mains_cluster_job_kept_and_writes_no_cache():
    ci = {s["with"]["path"].strip(): s["with"]["key"] for s in workflow("ci.yml")["jobs"]["cluster"]["steps"]
          if s.get("uses", "").startswith("actions/cache@")}
    job = workflow("preview.yml")["jobs"]["engine-preview"]
    used = [s for s in job["steps"] if s.get("uses", "").startswith("actions/cache")]
    assert used and all(s["uses"].startswith("actions/cache/restore@") for s in used)  # a pull request saves none
    assert {s["with"]["path"].strip(): s["with"]["key"] for s in used} == ci
    names = [s.get("name", "") for s in job["steps"]]
    assert names.index("Hand the restored tools to root") < names.index(
        "Real preview diff against the base branch, on a local cluster")


def test_every_ci_job_that_installs_from_the_lock_keeps_uvs_downloads_by_the_lock_in_its_own_entry():
    # The fast and slow tiers (AIConfigurator's extra: about 760 MB) and the lab tier (.venv-twin:
    # about 2 GB) download what uv.lock pins on every cold run; one entry per job, as each installs
    # a different selection and a shared key would keep whichever job saved first.
    keys = {}
    for name, job in workflow("ci.yml")["jobs"].items():
        if any("python3 dev.py test" in s.get("run", "") for s in job["steps"]):
            (uv,) = [s for p, s in _cache_steps(job).items() if p == "~/.cache/uv"]
            assert "'uv.lock')" in uv["with"]["key"], name
            keys[name] = uv["with"]["key"]
    assert {"test", "lab", "cluster", "engine"} <= set(keys)
    assert len(set(keys.values())) == len(keys), keys


def test_gos_caches_are_kept_by_the_go_version_the_tools_are_built_with_and_the_wrappers_pins():
    # A new Go compiles every package again: its build cache restored from the old one would carry
    # the old packages along unused (and grow each save).
    for wf, name in (("ci.yml", "cluster"), ("preview.yml", "engine-preview")):
        job = workflow(wf)["jobs"][name]
        (go,) = [s for s in job["steps"] if "go-build" in s.get("with", {}).get("path", "")]
        key = go["with"]["key"]
        assert "${{ env.GOTOOLCHAIN }}" in key and "tools/cluster/**/go.sum" in key, (wf, key)
        assert job["env"]["GOTOOLCHAIN"].startswith("go1."), (wf, name)  # the job's, so the key has it
        restore = go["with"].get("restore-keys", "")
        assert not restore or "${{ env.GOTOOLCHAIN }}" in restore, (wf, restore)
    # The same template names the same entry only with the same value: the preview restores by the
    # exact key (no restore-keys), so another Go there than in ci.yml's cluster job misses every time.
    assert workflow("preview.yml")["jobs"]["engine-preview"]["env"]["GOTOOLCHAIN"] == \
        workflow("ci.yml")["jobs"]["cluster"]["env"]["GOTOOLCHAIN"]
