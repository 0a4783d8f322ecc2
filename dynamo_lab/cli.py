"""`dynamo-lab COMMAND` (also `python -m dynamo_lab COMMAND` and `python3 dev.py COMMAND`): the lab's tools.

Each command reads the stack files of the project it is run in. `preflight` and `advise` read a
cluster (read-only), or a saved copy of what they read; `up`/`down --local`, `pr-preview` and
`local-cluster` run the real Pulumi CLI on a local cluster of their own (root); the rest run offline.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Optional

from dynamo_lab import flags, procs
from infra.errors import UserError


def _stack(name: str):
    """The stack file, loaded and sized: a Stack (ConfigError when the stack file is wrong)."""
    from dynamo_lab import stack_files

    return stack_files.load(name)


def _render(args: argparse.Namespace) -> int:
    from dynamo_lab import mockrun, render

    run = mockrun.run(args.stack)
    sys.stdout.write(render.to_json(run) + "\n" if args.json else render.to_yaml(run))
    return 0


def _sizing(args: argparse.Namespace) -> int:
    from dynamo_lab import sizing_text

    sizing = _stack(args.stack).sizing
    print(json.dumps(sizing.as_dict(), indent=2) if args.json else sizing_text.table(sizing))
    return 0


def _golden(args: argparse.Namespace) -> int:
    from dynamo_lab import review, stack_files

    written = review.write_golden(stack_files.project_root(), args.stacks or None)
    for path, changed in written:
        if changed:
            print(f"wrote {path}")
    same = sum(1 for _, changed in written if not changed)
    print(f"{same} of {len(written)} golden files already current" if same else f"{len(written)} written")
    return 0


def _diff(args: argparse.Namespace) -> int:
    from dynamo_lab import review, stack_files

    return review.diff(stack_files.project_root(), args.base, args.stacks, sys.stdout)


def _probe_local(args: argparse.Namespace) -> int:
    from dynamo_lab import probe_runner

    plan, params, kv = probe_runner.plan_for(args.stack, args.bytes, args.op, args.pattern, args.tokens)
    result = probe_runner.measure_against_sizing(args.link, plan, args.repeats, args.timeout, params, kv,
                                                 args.stack, args.flows)
    print(json.dumps(result, indent=2) if args.json else probe_runner.text(result))
    return 0 if result["intact"] else 1


def _twin(args: argparse.Namespace) -> int:
    import time

    from dynamo_lab.twin.runner import Twin

    stack = _stack(args.stack)
    try:
        with Twin(stack.config, stack.sizing, log=lambda m: print(m, file=sys.stderr, flush=True)) as twin:
            print(f"twin of {args.stack} ready: {twin.url}/v1/chat/completions (Ctrl-C stops it)", flush=True)
            deadline = time.monotonic() + args.seconds if args.seconds else None
            while deadline is None or time.monotonic() < deadline:
                time.sleep(0.5)
    except KeyboardInterrupt:  # the way to stop a twin: not an error
        print("twin stopped", file=sys.stderr)
    return 0


def _bench(args: argparse.Namespace) -> int:
    from dynamo_lab.bench import sweep

    stack = _stack(args.stack)
    cfg, sizing = stack.config, stack.sizing
    out = Path(args.out)
    if args.target == "cluster":
        print(sweep.cluster_steps(args.stack, cfg, out))
        return 0
    overrides = {k: v for k, v in (("prefix_types", args.prefix_types), ("concurrency", args.concurrency),
                                   ("runs", args.runs)) if v}
    return sweep.main_twin(cfg, sizing, args.stack, out, args.quick, overrides)


def _preflight(args: argparse.Namespace) -> int:
    from dynamo_lab.preflight import cluster_data, text
    from dynamo_lab.preflight.run import check

    stack = _stack(args.stack)
    data = cluster_data.read_file(args.source) if args.source else cluster_data.read_live(stack.config.target)
    try:
        report = check(stack, data)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        if not args.source:
            raise
        # read_file checks the shape of every field the checks read; this is the net under it.
        raise cluster_data.ClusterUnreadable(
            f"{data.source}: an object in it has a shape preflight cannot read ({type(exc).__name__}: {exc}); "
            f"{cluster_data.RESAVE}") from None
    print(text.to_json(report) if args.json else text.text(report))
    return 0 if report.fits else 1


def _predict(args: argparse.Namespace) -> int:
    from dynamo_lab.predict import calibrate, cells, text, validate
    from dynamo_lab.predict.envelope import envelope
    from dynamo_lab.predict.params import LAB

    validate.check_mode(args.stack, args.rate, args.json, validate=args.validate, calibrate=args.calibrate,
                        cross_validate=args.cross_validate)
    if args.calibrate or args.validate or args.cross_validate:
        stacks = validate.lab_stacks()
        if args.calibrate or args.cross_validate:
            fit = calibrate.cross_validate if args.cross_validate else calibrate.calibrate
            done = fit({n: stacks[n] for n in validate.TABLE_STACKS}, LAB,
                       log=lambda m: print(m, file=sys.stderr, flush=True))
            print(text.cross_validation(done, LAB) if args.cross_validate else text.calibration(*done))
            return 0
        result = validate.validate(stacks)
        print(text.validation_json(result, LAB.pool_scale) if args.json else text.validation(result, LAB.pool_scale))
        return 0
    if not args.stack:
        raise UserError("name a stack (dynamo-lab predict STACK), or pass --validate, --calibrate or --cross-validate")
    stack = _stack(args.stack)
    rows = cells.predict(stack.config, stack.sizing, rates=args.rate)
    marks = [envelope(stack.resolved, r.prefix_types, r.concurrency, rate=r.rate) for r in rows]
    print(text.to_json(args.stack, rows, cells.inputs(stack.config, stack.sizing), marks) if args.json
          else text.matrix(args.stack, rows, LAB.pool_scale, marks))
    return 0


def _goal(name: str) -> str:
    """--goal's type: one of advise's goals; a retired one is refused with what replaces it (argparse's
    `choices` listed the retired ones among those to choose from)."""
    from dynamo_lab.advise.inputs import goal_refusal

    why = goal_refusal(name)
    if why is not None:
        raise argparse.ArgumentTypeError(f"{name!r}: {why}")
    return name


def _objective_hint(arg: str) -> Optional[str]:
    """An objective flag of a percentile or metric advise does not bound (`--itl-p90-max`), as a
    refusal of that flag with the ones there are."""
    from dynamo_lab.predict.objectives import METRICS, PERCENTILES

    m = flags.OBJECTIVE_FLAG.fullmatch(arg)
    if m is None:
        return None
    flag = arg.split("=", 1)[0]
    if m["metric"] not in METRICS:
        return (f"argument {flag}: advise's objectives bound {', '.join(METRICS)}: write "
                + " or ".join(f"--{metric}-p{m['percentile']}-max MS" for metric in METRICS))
    return (f"argument {flag}: advise's objectives bound p{' or p'.join(map(str, PERCENTILES))}, the percentiles the "
            "predictor reports: write " + " or ".join(f"--{m['metric']}-p{q}-max MS" for q in PERCENTILES))


def _advise(args: argparse.Namespace) -> int:
    from dynamo_lab.advise import command, inputs, text
    from dynamo_lab.advise.inputs import Goal
    from dynamo_lab.predict.objectives import METRICS, PERCENTILES

    objectives = inputs.objectives_given({f"{m}_p{q}": getattr(args, f"{m}_p{q}_max")
                                          for m in METRICS for q in PERCENTILES})
    req = command.prepare(args.stack, args.write, args.force, args.source, Goal(args.goal, objectives),
                          input_tokens=args.input_tokens, prefix_tokens=args.prefix_tokens,
                          output_tokens=args.output_tokens, prefix_types=args.prefix_types,
                          concurrency=args.concurrency, rates=args.rate)
    # On stderr: stdout holds only the answer (its --json a document of its own).
    advice, data = command.advise(req, progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(text.to_json(advice) if args.json else text.text(advice, args.top))
    if advice.winner is None:
        if req.out is not None:
            print(text.not_written(args.write, advice), file=sys.stderr if args.json else sys.stdout)
        return 1
    if req.out is not None:
        command.write_winner(req, advice, data)
        print(text.written(args.write, advice, args.source), file=sys.stderr if args.json else sys.stdout)
    return 0


def _report(args: argparse.Namespace) -> int:
    from dynamo_lab.bench import table

    predictor = None
    if args.predicted:
        from dynamo_lab.predict.cells import predicted_point as predictor
    print(table.main(args.results, args.baseline, args.plot, args.published, predictor))
    return 0


def _config_reference(args: argparse.Namespace) -> int:
    from dynamo_lab import config_reference

    changed = config_reference.write()
    page = config_reference.PAGE.relative_to(config_reference.ROOT)
    print(f"{page}: configuration reference {'rewritten' if changed else 'already current'}")
    return 0


def _docs_samples(args: argparse.Namespace) -> int:
    from dynamo_lab import docs_samples, stack_files

    root, log = stack_files.project_root(), (lambda m: print(m, file=sys.stderr, flush=True))
    if args.check:
        stale = docs_samples.stale(main, parser, root, only=args.pages or None, slow=not args.fast, log=log)
        for sample in stale:
            print(docs_samples.stale_message(sample))
        return 1 if stale else 0
    changed = [s for s, differs in docs_samples.regenerate(main, parser, root, only=args.pages or None,
                                                           slow=not args.fast, log=log) if differs]
    for sample in changed:
        print(f"{sample.where}: rewrote the sample `{sample.describe()}` prints")
    print(f"{len(changed)} sample(s) rewritten" if changed else "every sample already current")
    return 0


def _local(args: argparse.Namespace) -> int:
    from dynamo_lab.local_cluster import local

    local.check_stack(args.stack)  # a stack name or nothing: it becomes a path the local run removes
    if not args.local:
        raise UserError(f"only --local is here: it {'deploys onto' if args.command == 'up' else 'removes from'} the "
                        f"local lab cluster. For your cluster, run Pulumi itself: pulumi "
                        f"{'up' if args.command == 'up' else 'destroy'} --stack {args.stack}")
    if args.command == "up":
        return local.up(args.stack)
    return local.down(args.stack, keep_local_cluster=args.keep_local_cluster)


def _pr_preview(args: argparse.Namespace) -> int:
    from dynamo_lab.local_cluster import local

    return local.pr_preview(args.base, args.head, args.stacks or None)


def parser() -> argparse.ArgumentParser:
    p = flags.Parser(prog="dynamo-lab", description=__doc__,
                     epilog="dynamo-lab local-cluster up|down|status: the local lab cluster of the cluster tier "
                            "(a control plane with kwok's GPU nodes; root; dynamo-lab local-cluster --help)")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("render", help="print what a stack declares, from its stack file, under Pulumi mocks")
    r.add_argument("stack", help="stack name: the STACK of Pulumi.STACK.yaml")
    r.add_argument("--json", action="store_true", help="JSON list of {type, name, inputs} in registration order")
    r.set_defaults(func=_render)
    s = sub.add_parser("sizing", help="KV bytes, GPU fit, host memory and transfer cost of a stack")
    s.add_argument("stack")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_sizing)
    g = sub.add_parser("golden", help="re-render tests/golden/<stack>.yaml of the shipped stacks, or of each "
                       "STACK named (review the diff, then commit)")
    g.add_argument("stacks", nargs="*", metavar="STACK")
    g.set_defaults(func=_golden)
    d = sub.add_parser("diff", help="manifest diff, git ref vs working tree, of every stack file (the lab's, the "
                       "examples, your own) or each STACK named; exit 0 same, 1 changed, 2 a working tree's stack "
                       "file could not be rendered (each named, with why; every other stack is still diffed) or "
                       "another error")
    d.add_argument("--base", help="git ref to compare with (default: merge base with main)")
    d.add_argument("stacks", nargs="*", metavar="STACK")
    d.set_defaults(func=_diff)
    pr = sub.add_parser("probe", help="measure a KV transfer with NIXL over UCX")
    prs = pr.add_subparsers(dest="where", required=True)
    loc = prs.add_parser("local", help="on this machine: loopback, or two network namespaces on a shaped veth")
    loc.add_argument("--link", default="loopback", help="loopback (same node) or a rate such as 1gbit (root)")
    what = loc.add_mutually_exclusive_group(required=True)
    what.add_argument("--bytes", type=flags.positive_bytes, help="bytes per transfer (e.g. 272M)")
    what.add_argument("--stack", help="use this stack's KV bytes per request and its sizing parameters")
    loc.add_argument("--tokens", type=flags.positive_int, help="with --stack: move this many tokens' KV (default: "
                     "workload.inputTokens, one average request; e.g. 371, a warm request's unique tokens)")
    loc.add_argument("--op", type=str.upper, choices=["READ", "WRITE"],
                     help="READ (default): the decode side pulls, as NixlConnector does; WRITE: the prefill "
                     "side pushes, vLLM's NixlPushConnector, which no worker takes through Dynamo 1.6 (for "
                     "measuring only)")
    loc.add_argument("--pattern", choices=["blocks", "contiguous"], default="blocks",
                     help="blocks: one descriptor per layer per KV block, scattered in pools like the "
                     "workers' (default); contiguous: one descriptor")
    loc.add_argument("--repeats", type=flags.positive_int, default=5,
                     help="timed transfers after the warm-up (default 5)")
    loc.add_argument("--flows", type=flags.positive_int, default=1,
                     help="transfers of one request's KV each, started together between the two endpoints, "
                     "as N decode pulls from one prefill worker (default 1); reports per-flow and aggregate")
    loc.add_argument("--timeout", type=flags.positive_seconds, default=120,
                     help="seconds before giving up (default 120)")
    loc.add_argument("--json", action="store_true")
    loc.set_defaults(func=_probe_local)
    tw = sub.add_parser("twin", help="run a local twin of a stack (Dynamo frontend + mocker workers)")
    tw.add_argument("stack")
    tw.add_argument("--seconds", type=flags.positive_seconds, help="stop after this long (default: until Ctrl-C)")
    tw.set_defaults(func=_twin)
    be = sub.add_parser("bench", help="run the benchmark sweep against a twin, or print the in-cluster steps")
    be.add_argument("stack")
    be.add_argument("--target", choices=["twin", "cluster"], required=True)
    be.add_argument("--quick", action="store_true", help="prefix types 2 x concurrency 4 x 1 run")
    be.add_argument("--out", default="bench-out", help="results directory (default bench-out)")
    be.add_argument("--prefix-types", type=flags.int_list, help="override the matrix, e.g. 2,24")
    be.add_argument("--concurrency", type=flags.int_list, help="override the matrix, e.g. 4,8")
    be.add_argument("--runs", type=flags.positive_int, help="override runs per point")
    be.set_defaults(func=_bench)
    pf = sub.add_parser("preflight", help="will this stack fit its cluster? read-only; exit 0 fits, 1 does not, "
                        "2 cluster unreadable")
    pf.add_argument("stack")
    pf.add_argument("--from", dest="source", metavar="FILE",
                    help="read saved kubectl output instead of the live cluster ('-': stdin; docs/preflight.md)")
    pf.add_argument("--json", action="store_true")
    pf.set_defaults(func=_preflight)
    pd = sub.add_parser("predict", help="predicted TTFT and requests/s for every cell of the benchmark matrix")
    pd.add_argument("stack", nargs="?", help="the stack to predict (its config as it is)")
    pd.add_argument("--json", action="store_true", help="rows and the inputs the prediction used")
    pd.add_argument("--validate", action="store_true",
                    help="the prediction's error against every cell the write-up published")
    pd.add_argument("--calibrate", action="store_true",
                    help="refit the lab's constants to the concurrency-4 cells (prints them; minutes)")
    pd.add_argument("--cross-validate", action="store_true",
                    help="leave each prefix type out of the concurrency-4 fit in turn and predict its cells with "
                    "the rest's (tens of minutes): judges a model change without the concurrency-8 hold-out")
    pd.add_argument("--rate", type=flags.rate_list, metavar="R[,R...]",
                    help="open loop: requests arriving at R per second (Poisson) instead of the benchmark's "
                    "closed-loop concurrency, for each of its prefix types")
    pd.set_defaults(func=_predict)
    ad = sub.add_parser("advise", help="which layout this cluster should run for a workload: every layout the "
                        "sizing and preflight accept, ranked by the predictor (estimates); exit 0 one ranks "
                        "first (recommended, or not: --json's `recommended`), 1 none fits or meets the goal, 2 error")
    ad.add_argument("stack", help="the base stack: its cluster (kubernetes:context), GPU classes, model and settings; "
                    "its benchmark section is the default workload")
    ad.add_argument("--from", dest="source", metavar="FILE",
                    help="read saved kubectl output instead of the live cluster, as preflight does ('-': stdin)")
    ad.add_argument("--input-tokens", type=flags.positive_int, help="prompt tokens per request (default: the stack's "
                    "benchmark)")
    ad.add_argument("--prefix-tokens", type=flags.nonnegative_int, help="the shared prefix within them (0: none)")
    ad.add_argument("--output-tokens", type=flags.positive_int, help="output tokens per request")
    ad.add_argument("--prefix-types", type=flags.int_list, help="distinct shared prefixes, e.g. 2,24 (with no shared "
                    "prefix they are one workload: one point per concurrency)")
    ad.add_argument("--concurrency", type=flags.int_list, help="requests in flight, e.g. 4,8 (with --rate: only what "
                    "every candidate is sized for, its largest)")
    ad.add_argument("--rate", type=flags.rate_list, metavar="R[,R...]",
                    help="open loop: requests/s arriving (Poisson) at each point instead of a closed loop's "
                    "concurrency, e.g. 2,6 (a closed loop lets a slower layout send fewer requests); goodput "
                    "counts the requests arriving that meet every objective")
    ad.add_argument("--goal", type=_goal, metavar="{goodput,goodput-per-gpu}", default="goodput",  # inputs.GOALS
                    help="rank the layouts that meet every objective by goodput, the requests/s meeting every "
                    "objective (default), or by goodput per GPU, output tokens/s per GPU (docs/advise.md)")
    from dynamo_lab.predict.objectives import DEFAULT_OBJECTIVES

    for metric, what in (("ttft", "time to first token"), ("itl", "the gap between two tokens of a request"),
                         ("tpot", "a request's mean time per output token after its first")):
        for q in (50, 99):
            default = next((o for o in DEFAULT_OBJECTIVES if (o.metric, o.percentile) == (metric, q)), None)
            ad.add_argument(f"--{metric}-p{q}-max", type=flags.positive_ms, action=flags.ObjectiveBound, metavar="MS",
                            help=f"objective: {what}, p{q}, at most MS at every point"
                            + (f" (default {default.bound_ms:g}, unless a flag bounds {metric.upper()})" if default
                               else ""))
    ad.unknown_hint = _objective_hint
    ad.add_argument("--top", type=flags.positive_int, default=3, help="layouts shown (default 3)")
    ad.add_argument("--write", metavar="Pulumi.NAME.yaml", help="write the recommended layout as stack NAME's file")
    ad.add_argument("--force", action="store_true", help="with --write: replace the file if it exists")
    ad.add_argument("--json", action="store_true")
    ad.set_defaults(func=_advise)
    rp = sub.add_parser("report", help="the lab's table and a PNG plot from results.jsonl files")
    rp.add_argument("results", nargs="+", help="results.jsonl of the variant(s)")
    rp.add_argument("--baseline", help="results.jsonl of the baseline (e.g. kv-routing)")
    rp.add_argument("--plot", help="write a PNG plot here")
    rp.add_argument("--published", action="store_true",
                    help="add the lab's published figures (docs/lab.md) beside the results")
    rp.add_argument("--predicted", action="store_true",
                    help="add the predictor's figures for each stack as configured (docs/predictor.md)")
    rp.set_defaults(func=_report)
    up = sub.add_parser("up", help="--local: the real pulumi preview and up of a stack onto the local lab cluster "
                        "(started if it is not running; root)")
    up.add_argument("stack")
    up.add_argument("--local", action="store_true", help="deploy onto the local lab cluster (required)")
    up.set_defaults(func=_local)
    dn = sub.add_parser("down", help="--local: pulumi destroy of a stack on the local lab cluster, then the cluster")
    dn.add_argument("stack")
    dn.add_argument("--local", action="store_true", help="the local lab cluster's deployment (required)")
    dn.add_argument("--keep-local-cluster", action="store_true", help="leave the local cluster running")
    # Its name until "cluster" came to mean only the cluster a stack targets.
    dn.unknown_hint = lambda arg: ("argument --keep-cluster: it is --keep-local-cluster now"
                                   if arg.split("=", 1)[0] == "--keep-cluster" else None)
    dn.set_defaults(func=_local)
    pp = sub.add_parser("pr-preview", help="the real pulumi preview --diff of HEAD against BASE deployed on a fresh "
                        "local cluster, per stack (root)")
    pp.add_argument("base", help="the git ref deployed first (e.g. the pull request's base)")
    pp.add_argument("head", help="the git ref previewed against it")
    pp.add_argument("--stack", dest="stacks", action="append", help="only this stack (repeatable)")
    pp.set_defaults(func=_pr_preview)
    cr = sub.add_parser("config-reference", help="rewrite docs/configuration.md's tables from the schema "
                        "(infra/config/schema.py)")
    cr.set_defaults(func=_config_reference)
    ds = sub.add_parser("docs-samples", help="rewrite every sample README.md and docs/ show from the command its "
                        "marker names (<!-- sample: ... -->; dynamo_lab/docs_samples.py), and the configuration "
                        "reference; minutes, as the advise and predict samples run the predictor")
    ds.add_argument("pages", nargs="*", metavar="PAGE", help="only these pages (README.md, docs/advise.md, ...)")
    ds.add_argument("--fast", action="store_true", help="leave the samples that run the predictor as they are")
    ds.add_argument("--check", action="store_true", help="write nothing: list the samples that differ (exit 1)")
    ds.set_defaults(func=_docs_samples)
    return p


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["local-cluster"]:  # the local lab cluster has a command line of its own
        from dynamo_lab.local_cluster.__main__ import main as local_cluster_main

        return local_cluster_main(argv[1:])
    if argv[:1] == ["cluster"]:  # its name until "cluster" came to mean only the cluster a stack targets
        print("error: dynamo-lab cluster: the local lab cluster's command is `dynamo-lab local-cluster "
              f"{shlex.join(argv[1:]) or 'up|down|status'}` now (\"cluster\" names the cluster a stack deploys "
              "onto, kubernetes:context)", file=sys.stderr)
        return 2
    args = parser().parse_args(argv)
    procs.forget()
    try:
        return args.func(args)
    except UserError as exc:
        # One style for every refusal, as argparse's (flags.Parser): `error: dynamo-lab COMMAND: ` and then
        # the message, which names the file and the key (a ConfigError: `Pulumi.STACK.yaml: KEY: `),
        # says why with the numbers and what to write instead; a ConfigError of several problems has
        # one line each, each a refusal of its own. Lines end at a newline only: a message quotes
        # what the user wrote, a carriage return or form feed in a key included (str.splitlines would
        # end a line there too).
        print("\n".join(f"error: {command_words(args)}: {line}" for line in str(exc).split("\n")), file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "infra":
            raise
        # Only the standard library is imported before a command runs: a package missing here means
        # this Python is not the project's environment (the system python3 outside .venv, say).
        print(f"error: {command_words(args)}: it needs the Python package `{exc.name}`, which this Python "
              f"({sys.executable}) does not have: it is not the project's environment. Run it as "
              f"`python3 dev.py {shlex.join(argv)}` from the project: dev.py installs what uv.lock pins for "
              "the command into .venv and runs it there", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C; SIGTERM and SIGHUP where a command handles them (procs)
        print(procs.interrupted_message(), file=sys.stderr)
        return 128 + getattr(exc, "signum", 2)
    except BrokenPipeError:
        # The reader stopped early (`dynamo-lab sizing STACK | head`): nothing more to say. Point
        # stdout at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command that a pipe's reader cut off


def command_words(args: argparse.Namespace) -> str:
    """`dynamo-lab COMMAND` (`dynamo-lab probe local`) as a refusal names it, as argparse's prog does."""
    return " ".join(["dynamo-lab", args.command, *([args.where] if getattr(args, "where", None) else [])])


def entry() -> None:
    """The process entry of `dynamo-lab` and `python -m dynamo_lab`: main, then exit with its code.

    The objects the command made are frozen first (gc.freeze): the interpreter's last collections
    at exit would otherwise walk every one of them, the classes of pulumi and pulumi_kubernetes
    included, about 0.2 s of a 0.7 s `render`. Exit handlers and finalizers registered for exit
    (temporary directories, the probes' namespaces) still run; in-process callers use main().
    """
    code = main()
    gc.freeze()
    sys.exit(code)
