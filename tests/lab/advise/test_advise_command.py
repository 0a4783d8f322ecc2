"""`dynamo-lab advise` (fast tier): its command line and --write: arguments refused before
anything is read or written, one line naming the flag and the fix, and the written stack file
(loads, sizes and passes preflight from its own text; never replaces what it must not)."""



import pytest

from dynamo_lab import stack_files
from dynamo_lab.advise import inputs, text, uncertainty, write
from dynamo_lab.predict.objectives import DEFAULT_OBJECTIVES, METRICS, PERCENTILES, Objective
from dynamo_lab.preflight.run import check
from infra.errors import UserError
from tests.helpers import ROOT, run_cli
from tests.lab.advise.common import FIXED, SHORT, advise, base, point, small_lab, verdict_line


def test_the_written_file_loads_sizes_and_passes_preflight_from_its_own_text(tmp_path):
    config = base()
    config["dynamo-lab:hfToken"] = {"secure": "v1:abc"}
    a = advise(config, data=small_lab(), traffic=point(2, 4, output_tokens=SHORT), name="advised")
    path = tmp_path / "Pulumi.advised.yaml"
    write.write(path, a, a.winner, config, small_lab())
    written = path.read_text()
    assert written.startswith("# Written by `dynamo-lab advise kv-routing`")
    assert "ESTIMATES" in written and "hfToken" in written and "v1:abc" not in written
    stack = stack_files.load("advised", tmp_path)
    assert stack.config.graph.namespace == "dynamo-lab-advised"
    assert [g.model_dump(by_alias=True, include={"name", "role", "replicas", "gpu_class"}) for g in
            stack.config.workers] == a.winner.layout.workers()
    assert check(stack, small_lab()).fits


def test_write_refuses_a_name_pulumi_would_not_read_a_file_that_exists_and_the_files_it_must_not_replace(tmp_path):
    with pytest.raises(UserError, match=r"name it Pulumi.<stack>.yaml"):
        write.stack_name(str(tmp_path / "advised.yaml"))
    existing = tmp_path / "Pulumi.kept.yaml"
    existing.write_text("config: {}\n")
    with pytest.raises(UserError, match="the file exists and is left as it is"):
        write.refuse_existing(existing, False, "kv-routing")
    assert existing.read_text() == "config: {}\n"
    write.refuse_existing(existing, True, "kv-routing")  # --force replaces it
    with pytest.raises(UserError, match="that is mine's own file, the base: its secrets are encrypted for it"):
        write.refuse_existing(tmp_path / "Pulumi.mine.yaml", True, "mine")
    with pytest.raises(UserError, match="same-server is one of the lab's stacks"):
        write.refuse_existing(tmp_path / "Pulumi.same-server.yaml", True, "kv-routing")
    # Only into the project's directory, where Pulumi reads stack files; a bare name goes there.
    assert write.target("Pulumi.a.yaml", tmp_path) == tmp_path / "Pulumi.a.yaml"
    assert write.target(str(tmp_path / "Pulumi.a.yaml"), tmp_path) == tmp_path / "Pulumi.a.yaml"
    with pytest.raises(UserError, match=f"write the stack file into the project's directory, {tmp_path}"):
        write.target(str(tmp_path / "sub" / "Pulumi.a.yaml"), tmp_path)


def test_write_refuses_a_directory_it_cannot_write_in_with_one_line_and_writes_nothing(tmp_path):
    a = advise(data=small_lab(), traffic=point(2, 4, output_tokens=SHORT))
    gone = tmp_path / "gone"  # removed after the search, as a directory can be; root could write a read-only one
    with pytest.raises(UserError, match=f"--write Pulumi.advised.yaml: {gone} is not writable by this user"):
        write.write(gone / "Pulumi.advised.yaml", a, a.winner, base(), small_lab())
    assert not gone.exists()


@pytest.mark.parametrize(("args", "says"), [
    (["--write", "advised.yaml"], "name it Pulumi.<stack>.yaml"),
    (["--force"], "--force replaces the file --write names"),
    (["--write", "Pulumi.cross-server.yaml"], "the file exists and is left as it is"),
    (["--write", "Pulumi.same-server.yaml", "--force"], "same-server is one of the lab's stacks"),
    (["--write", "Pulumi.kv-routing.yaml", "--force"], "that is kv-routing's own file, the base"),
    (["--write", "/tmp/Pulumi.elsewhere.yaml"], "write the stack file into the project's directory"),
    (["--concurrency", "65"], "concurrency 65 is more than advise simulates (64"),
    (["--rate", "2,1500"], "--rate 1500 requests/s is more than advise simulates (1000/s)"),
    # Each point is simulated for every layout: 9 rates x the benchmark's 4 prefix types is 36.
    (["--rate", "1,2,3,4,5,6,7,8,9"], "36 points is more than advise simulates (32"),
    # With --rate the concurrency is only what layouts are sized for, and the refusal says so.
    (["--rate", "2", "--concurrency", "100"], "with --rate, --concurrency is what each layout is sized for"),
    # The goals that meant something else are refused, naming what replaces them.
    (["--goal", "requests-per-s"], "--goal: 'requests-per-s': advise ranks by goodput now"),
    (["--goal", "ttft-p50"], "bound it with --ttft-p50-max MS"),
    (["--itl-p99-max", "0"], "--itl-p99-max"),
    (["--prefix-tokens", "3000"], "the shared prefix (3,000 tokens"),
    (["--input-tokens", "1000"], "is not less than the input (1,000"),
    # Longer than the model's context: no layout could serve it, so it is the input to fix.
    (["--output-tokens", "50000"], "no layout can serve the workload given (--input-tokens is workload.inputTokens"),
])
def test_bad_arguments_are_refused_before_anything_is_read_or_written(args, says):
    before = {p.name: p.read_bytes() for p in ROOT.glob("Pulumi.*.yaml")}
    result = run_cli("advise", "kv-routing", "--from", "/nonexistent", *args)
    assert result.returncode == 2, result
    assert says in result.stderr and "Traceback" not in result.stderr
    assert {p.name: p.read_bytes() for p in ROOT.glob("Pulumi.*.yaml")} == before
    assert result.stdout == ""


def test_the_goal_choices_are_the_searchs_and_each_objective_has_its_flag():
    from dynamo_lab.cli import parser

    advise_parser = parser()._subparsers._group_actions[0].choices["advise"]
    goal = next(a for a in advise_parser._actions if a.dest == "goal")
    assert goal.metavar == "{" + ",".join(inputs.GOALS) + "}"  # the retired two are not offered
    for name in inputs.GOALS:
        assert advise_parser.parse_args(["kv-routing", "--goal", name]).goal == name
    flags = {o for a in advise_parser._actions for o in a.option_strings}
    assert {Objective(m, q, 1.0).flag for m in METRICS for q in PERCENTILES} <= flags


def test_a_flag_replaces_its_metrics_default_objective_and_keeps_the_others():
    assert inputs.objectives_given({}) == DEFAULT_OBJECTIVES
    given = inputs.objectives_given({"ttft_p50": 300.0, "ttft_p99": None, "tpot_p99": 40.0})
    assert Objective("ttft", 50, 300.0) in given and Objective("tpot", 99, 40.0) in given
    assert not any(o.metric == "ttft" and o.percentile == 99 for o in given)  # TTFT is bounded by the flag
    assert [o for o in given if o.metric == "itl"] == [o for o in DEFAULT_OBJECTIVES if o.metric == "itl"]
    # --ttft-p99-max means what it meant: TTFT p99 at most MS at every point.
    assert inputs.objectives_given({"ttft_p99": 300.0})[-1] == Objective("ttft", 99, 300.0)


def test_a_missing_cluster_file_is_one_line_and_exit_2(tmp_path):
    result = run_cli("advise", "kv-routing", "--from", str(tmp_path / "none.json"))
    assert result.returncode == 2 and "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_without_the_labs_stacks_to_measure_its_error_advise_stops_and_says_why(tmp_path):
    (tmp_path / "Pulumi.yaml").write_bytes((ROOT / "Pulumi.yaml").read_bytes())
    (tmp_path / "Pulumi.mine.yaml").write_bytes((ROOT / "Pulumi.kv-routing.yaml").read_bytes())
    result = run_cli("advise", "mine", "--from", str(ROOT / "tests" / "data" / "preflight" / "lab.json"),
                     "--write", "Pulumi.advised.yaml", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert "measures with the lab's own stacks, kv-routing and same-server" in result.stderr
    assert "no stack file Pulumi.kv-routing.yaml" in result.stderr
    assert not (tmp_path / "Pulumi.advised.yaml").exists()


def test_the_p99_bound_is_taken_with_the_default_goal(tmp_path):
    # Past the arguments to reading the cluster: --ttft-p99-max is an objective of the default goal.
    result = run_cli("advise", "kv-routing", "--from", str(tmp_path / "none.json"), "--ttft-p99-max", "300")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: dynamo-lab advise: cannot read {tmp_path / 'none.json'}")


@pytest.mark.parametrize(("flag", "value", "says"), [
    *[("--rate", r, f"{r.split(',')[-1]!r}: write a positive number of requests per second")
      for r in ("0", "-1", "inf", "nan", "2,", "fast")],
    # 128 requests a run at 0.01/s span 3.5 hours of simulated time: refused, not simulated.
    ("--rate", "0.01", "0.01 requests/s is slower than the open loop simulated (0.1/s"),
    ("--rate", "3,1e-300", "1e-300 requests/s is slower than the open loop simulated"),
    # A repeated point would be simulated and weighted twice in the geometric mean.
    ("--rate", "3,3", "3 is given twice: give each value once"),
    ("--concurrency", "4,8,4", "4 is given twice"),
    ("--prefix-types", "2,2", "2 is given twice"),
])
def test_a_list_value_the_search_cannot_use_is_refused_by_the_parser(flag, value, says, capsys):
    from dynamo_lab.cli import parser

    with pytest.raises(SystemExit) as refused:
        parser().parse_args(["advise", "kv-routing", flag, value])
    assert refused.value.code == 2
    assert f"argument {flag}: " in (err := capsys.readouterr().err) and says in err


@pytest.mark.parametrize(("args", "flag", "says"), [
    # The same objective twice: argparse kept the last silently, so a script's earlier bound vanished.
    (["--ttft-p99-max", "100", "--ttft-p99-max", "200"], "--ttft-p99-max",
     "given twice (100 and 200 ms): give each objective once"),
    (["--itl-p50-max=20", "--itl-p50-max=20"], "--itl-p50-max", "given twice"),
    # A p50 bound above the same metric's p99 bound can never bind (a p50 is never above its p99).
    (["--ttft-p50-max", "3000", "--ttft-p99-max", "1000"], "--ttft-p99-max",
     "1,000 ms is below --ttft-p50-max's 3,000 ms"),
    (["--tpot-p99-max", "40", "--tpot-p50-max", "50"], "--tpot-p50-max", "50 ms is above --tpot-p99-max's 40 ms"),
    # A percentile the predictor does not report: was `error: dynamo-lab: unrecognized arguments`.
    (["--itl-p90-max", "5"], "--itl-p90-max", "write --itl-p50-max MS or --itl-p99-max MS"),
    (["--ttft-p95-max=500"], "--ttft-p95-max", "write --ttft-p50-max MS or --ttft-p99-max MS"),
    # A goal that does not exist lists only the goals there are, and a retired one says what replaces it.
    (["--goal", "bogus"], "--goal", "'bogus': not a goal; choose goodput or goodput-per-gpu"),
    (["--goal", "ttft-p50"], "--goal", "bound it with --ttft-p50-max MS"),
    (["--goal", "requests-per-s"], "--goal", "advise ranks by goodput now"),
])
def test_an_objective_or_goal_the_search_cannot_use_is_one_line_naming_its_flag_and_the_fix(args, flag, says):
    result = run_cli("advise", "kv-routing", "--from", "/nonexistent", *args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"error: dynamo-lab advise: argument {flag}: "), result.stderr
    assert says in result.stderr and result.stderr.count("\n") == 1
    assert "choose from" not in result.stderr  # argparse's choices offered the retired goals among the rest


def test_an_argument_no_command_takes_is_refused_by_the_command_it_was_given_to():
    result = run_cli("advise", "kv-routing", "--from", "/nonexistent", "--frobnicate")
    assert result.returncode == 2
    assert result.stderr.startswith("error: dynamo-lab advise: unrecognized arguments: --frobnicate")


def test_a_tie_written_says_it_is_the_first_of_a_tie_and_what_it_ties_with(tmp_path):
    a = advise(data=small_lab(), traffic=point(2, 4, output_tokens=SHORT))
    a.uncertainty = uncertainty.Uncertainty({**FIXED.metrics, "requests_per_s": uncertainty.MetricError(
        1.0, 1.0, 100.0, 100.0, 16)})  # every lead within it
    close = a.close_call
    assert close is not None and a.recommended is None
    assert verdict_line(a).startswith("Tied within the uncertainty: ")
    said = text.written("Pulumi.advised.yaml", a, None)
    assert f"the first of a tie within the uncertainty with {close.worse.label}, not a recommendation" in said
    path = tmp_path / "Pulumi.advised.yaml"
    write.write(path, a, a.winner, base(), small_lab())
    header = " ".join(ln.lstrip("# ") for ln in path.read_text().splitlines() if ln.startswith("#"))
    assert f"the first of a tie within the uncertainty with {close.worse.label}" in header
    # The header carries the decode side and goodput, as every figure printed does.
    assert "ITL p99" in header and "goodput" in header


def test_write_with_no_layout_meeting_the_objectives_says_nothing_was_written(monkeypatch):
    from dynamo_lab.advise import command

    none = advise(data=small_lab(), traffic=point(2, 4, output_tokens=SHORT),
                  goal=inputs.Goal("goodput", (Objective("itl", 50, 0.5),)))
    assert none.winner is None
    monkeypatch.setattr(command, "advise", lambda req, progress: (none, small_lab()))
    result = run_cli("advise", "kv-routing", "--from", "/nonexistent", "--write", "Pulumi.never-written.yaml")
    assert result.returncode == 1 and not (ROOT / "Pulumi.never-written.yaml").exists()
    assert result.stdout.rstrip().endswith("--write Pulumi.never-written.yaml: nothing written: no layout predicted "
                                           "in full meets every objective at every point.")
