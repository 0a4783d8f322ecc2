"""The question the lab's write-up left open (issues 34, 45): for a larger model on two 8-GPU nodes,
at which link, prompt length and load does separating prefill and decode pay? `python -m
dynamo_lab.advise.crossover` answers it with the predictor and advise's one verdict (verdict.py:
meeting the objectives first, then not preempting, then goodput, better only beyond the
uncertainty), as a Markdown table (docs/advise.md, "When separation pays"). EVERY
FIGURE IS AN ESTIMATE, outside what the validation covered (a 32B model, tensorParallel 2, whole
H100s, links and transports the lab never had, longer prompts, concurrency above 8): physics only
(docs/predictor.md, Envelope), the decode side never measured anywhere.

The comparison holds the GPUs equal: on Pulumi.two-node-rdma.yaml's cluster (two nodes of 8 whole
80GB GPUs, tests/data/preflight/two-8gpu-rdma.json), Qwen3-32B at tensorParallel 2, 4 aggregated
workers against the best of 1 + 3, 2 + 2 and 3 + 1 prefill + decode workers (separation's own
lever: the split follows the traffic), each group spread even over both nodes (8 GPUs each), at
each load (closed loop, CONCURRENCY), prompts with no shared prefix (each pays its whole prefill and
moves its whole KV), 128 output tokens, under advise's default objectives (predict/objectives.py).
Swept: the link (1 to 400 Gbit/s at efficiency 0.9) and the KV transport (UCX over TCP with host
buffers, each flow at most the TCP software path; or RDMA, GPU buffers, at the link), and the
prompt (2k, 8k, 32k tokens). Aggregated serving moves no KV, so its figures do not depend on the
link. Each layout is loaded, sized and preflighted against the saved cluster before it is predicted.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import Mapping, Optional

from dynamo_lab import flags, stack_files
from dynamo_lab.advise import command
from dynamo_lab.advise.candidates import AGGREGATED, ONE_NODE, Group, Layout
from dynamo_lab.advise.stack_file import candidate_config
from dynamo_lab.advise.traffic import Traffic
from dynamo_lab.advise.verdict import PREEMPTING, Separation, Standing, key, listed, near_bounds, separation
from dynamo_lab.paths import ROOT
from dynamo_lab.predict import cells, pool
from dynamo_lab.predict.cells import Row
from dynamo_lab.predict.envelope import envelope
from dynamo_lab.predict.objectives import DEFAULT_OBJECTIVES
from dynamo_lab.predict.params import LAB
from dynamo_lab.preflight import cluster_data
from dynamo_lab.preflight.run import check
from infra.plan import load_stack

BASE = "two-node-rdma"
CLUSTER = "tests/data/preflight/two-8gpu-rdma.json"
LINKS_GBIT = (1, 10, 25, 100, 400)
TRANSPORTS = ("tcp", "rdma")
PROMPTS = (2048, 8192, 32768)
OUTPUT_TOKENS = 128
CONCURRENCY = (4, 16)
TP = 2
LINK_EFFICIENCY = 0.9
OBJECTIVES = DEFAULT_OBJECTIVES
AGG = Layout(AGGREGATED, (Group("worker", "agg", "gpu-80gb", 4, TP, "even"),))
SPLITS = tuple(Layout(ONE_NODE, (Group("prefill", "prefill", "gpu-80gb", p, TP, "even"),
                                 Group("decode", "decode", "gpu-80gb", 4 - p, TP, "even"))) for p in (1, 2, 3))


@dataclass(frozen=True)
class Result:
    prompt: int
    concurrency: int
    transport: Optional[str]  # None: aggregated
    link_gbit: Optional[int]
    split: str  # the layout's label
    row: Row
    outside: tuple[str, ...]
    # The predictor's held-out median error by figure (uncertainty.Uncertainty.errors): a bound met or
    # broken within it is too close to call (verdict.near_bounds).
    errors: Mapping[str, float] = field(default_factory=dict)

    @property
    def standing(self) -> Standing:
        """What the one verdict compares (verdict.py), at this one point."""
        broken = [o for o in OBJECTIVES if not o.met_by(self.row)]
        near, beyond = near_bounds([(o, v) for o in OBJECTIVES if (v := o.value(self.row)) is not None], self.errors)
        return Standing(self.split, not broken, self.row.preemptions > PREEMPTING * self.row.requests,
                        max((o.value(self.row) / o.bound_ms for o in broken), default=0.0),
                        self.row.goodput_requests_per_s or 0.0,
                        tuple(f"{o.label} {o.value(self.row):,.0f} ms over {o.bound_ms:,g}" for o in broken),
                        near, beyond, self.row.requests_per_s)


def config(base: dict, layout: Layout, prompt: int, transport: str = "tcp", link_gbit: int = 100,
           concurrency: int = max(CONCURRENCY)) -> dict:
    """The base stack file with this layout, workload and link (disaggregated: its transport)."""
    traffic = Traffic(prompt, 0, OUTPUT_TOKENS, (1,), (concurrency,), given=True)
    doc = candidate_config(base, layout, traffic)
    doc["dynamo-lab:sizing"] = {**doc.get("dynamo-lab:sizing", {}),
                                "link": {"rate": f"{link_gbit}gbit", "efficiency": LINK_EFFICIENCY}}
    if layout.kind != AGGREGATED:
        for w in doc["dynamo-lab:workers"]:
            w["kvTransfer"] = ({"transport": "rdma", "bufferDevice": "cuda"} if transport == "rdma"
                               else {"transport": "tcp", "bufferDevice": "cpu"})
    return doc


def sweep(graphs: int, runs: int, workers: Optional[int] = None,
          errors: Optional[Mapping[str, float]] = None) -> list[Result]:
    base = stack_files.stack_doc(BASE)
    data = cluster_data.read_file(str(ROOT / CLUSTER))
    cases = [(p, c, None, None, AGG, config(base, AGG, p, concurrency=c)) for p in PROMPTS for c in CONCURRENCY]
    cases += [(p, c, t, g, x, config(base, x, p, t, g, c)) for p in PROMPTS for c in CONCURRENCY for t in TRANSPORTS
              for g in LINKS_GBIT for x in SPLITS]
    stacks = []
    for *_, doc in cases:
        stack = load_stack("crossover", *stack_files.config_from_doc(doc))  # a ConfigError: the sizing refuses
        report = check(stack, data)
        if not report.fits:
            raise SystemExit(f"preflight refuses {doc['dynamo-lab:workers']}: {report.problems[0].problem}")
        stacks.append(stack)
    jobs = [pool.Job(s.config, s.sizing, 1, c, LAB, graphs, runs, objectives=OBJECTIVES)
            for (_, c, *_), s in zip(cases, stacks, strict=True)]
    rows = pool.simulate(jobs, workers)
    return [Result(p, c, t, g, x.label, row, envelope(s.resolved, 1, c).outside, errors or {})
            for (p, c, t, g, x, _), s, (row, _) in zip(cases, stacks, rows, strict=True)]


def cell(results: list[Result], prompt: int, concurrency: int, transport: Optional[str],
         link: Optional[int]) -> Result:
    """A cell's layout: aggregated's, or the best split by the one verdict's order."""
    mine = [r for r in results if (r.prompt, r.concurrency, r.transport, r.link_gbit) ==
            (prompt, concurrency, transport, link)]
    return min(mine, key=lambda r: key(r.standing))


def answer(results: list[Result], prompt: int, concurrency: int, transport: str, link: int,
           threshold: float) -> Separation:
    """Whether separation pays in a cell: the one verdict between aggregated and the best split."""
    return separation(cell(results, prompt, concurrency, None, None).standing,
                      cell(results, prompt, concurrency, transport, link).standing, threshold)


def first_win(results: list[Result], prompt: int, concurrency: int, transport: str,
              threshold: float) -> Optional[int]:
    """The slowest link (Gbit/s) from which separation pays at every faster link swept, or None."""
    pays = {g: answer(results, prompt, concurrency, transport, g, threshold).answer == "pays" for g in LINKS_GBIT}
    wins = [g for g in LINKS_GBIT if all(pays[h] for h in LINKS_GBIT if h >= g)]
    return wins[0] if wins else None


def _short(label: str) -> str:
    """2 prefill + 2 decode on gpu-80gb (TP 2) -> 2P+2D."""
    words = label.split()
    return f"{words[0]}P+{words[3]}D"


def _figures(r: Result) -> str:
    row = r.row
    mark = "" if r.standing.meets else " \u2717"  # a cross: breaks an objective
    return (f"{row.ttft_p99_ms:,.0f} / {row.itl_p99_ms:,.0f} / {row.goodput_requests_per_s or 0:.2f}{mark}"
            + (" preempts" if r.standing.preempting else ""))


WORDS = {"pays": "**pays**", "does not pay": "no", "ties": "tie", "neither meets": "neither meets"}


def table(results: list[Result], threshold: float) -> str:
    """Each cell: TTFT p99 ms / ITL p99 ms / goodput requests/s (a cross where an objective breaks);
    a separated cell its best split and the one verdict against aggregated."""
    lines = ["| prompt | load | layout | " + " | ".join(f"{g} Gbit/s" for g in LINKS_GBIT)
             + " | separation pays from |", "|---|---|---|" + "---|" * len(LINKS_GBIT) + "---|"]
    for p in PROMPTS:
        for c in CONCURRENCY:
            agg = cell(results, p, c, None, None)
            lines.append(f"| {p:,} | {c} | aggregated, 4 x TP 2 | " + " | ".join([_figures(agg)] * len(LINKS_GBIT))
                         + " | |")
            for t in TRANSPORTS:
                cells_ = []
                for g in LINKS_GBIT:
                    best = cell(results, p, c, t, g)
                    said = answer(results, p, c, t, g, threshold).answer
                    cells_.append(f"{_short(best.split)} {_figures(best)}: {WORDS[said]}")
                win = first_win(results, p, c, t, threshold)
                lines.append(f"| {p:,} | {c} | prefill/decode, {t.upper()} | " + " | ".join(cells_)
                             + f" | {f'{win} Gbit/s' if win else 'not within the sweep'} |")
    return "\n".join(lines)


def _prompts(prompts: list[int]) -> str:
    return listed([f"{p:,}" for p in prompts])


def findings(results: list[Result], threshold: float) -> str:
    """What the table answers, in words: per transport and load, from which link up separation pays
    by the one verdict, for which prompts (read off the table by first_win, so the words cannot
    disagree with it)."""
    out = []
    for t in TRANSPORTS:
        parts = []
        for c in CONCURRENCY:
            by_link: dict[Optional[int], list[int]] = {}
            for prompt in PROMPTS:
                by_link.setdefault(first_win(results, prompt, c, t, threshold), []).append(prompt)
            said = [f"from {g} Gbit/s up for {_prompts(ps)}" for g, ps in sorted(
                (g, ps) for g, ps in by_link.items() if g is not None)]
            if None in by_link:
                said.append(f"at no link swept for {_prompts(by_link[None])}")
            parts.append(f"at concurrency {c} {', '.join(said)}")
        out.append(f"- **Over {t.upper()}**, separation pays (tokens a prompt): " + "; ".join(parts) + ".")
    return "\n".join(out)


def main(argv: Optional[list[str]] = None) -> int:
    p = flags.Parser(prog="python -m dynamo_lab.advise.crossover", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graphs", type=flags.positive_int, default=cells.SIMULATED_GRAPHS,
                   help="simulated graphs per cell")
    p.add_argument("--runs", type=flags.positive_int, default=cells.RUNS_PER_GRAPH, help="measured runs per graph")
    p.add_argument("--markdown", action="store_true", help="only the table and what it answers, in Markdown "
                   "(docs/advise.md's sample: no date, so the same on any day)")
    args = p.parse_args(argv)
    measured = command.measured_error()
    threshold = measured.metrics["requests_per_s"].holdout_median
    results = sweep(args.graphs, args.runs, errors=measured.errors)
    if args.markdown:
        print(table(results, threshold) + "\n\n" + findings(results, threshold))
        return 0
    outside = sorted({why for r in results for why in r.outside})
    bounds = "; ".join(o.describe() for o in OBJECTIVES)
    print(f"ESTIMATES, outside the validation (physics only): each cell TTFT p99 ms / ITL p99 ms / goodput "
          f"requests/s under {bounds} (\u2717: an objective broken); {args.graphs} graph(s) x {args.runs} run(s) "
          f"per cell; separation pays where it ranks first by advise's verdict, beyond an uncertainty of "
          f"{threshold:.0%}. `python -m dynamo_lab.advise.crossover --graphs {args.graphs} --runs {args.runs}`\n")
    print(table(results, threshold))
    print("\nOutside what the validation covered:\n" + "\n".join(f"- {why}" for why in outside))
    return 0


if __name__ == "__main__":
    sys.exit(main())
