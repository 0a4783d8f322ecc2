"""The question the lab's write-up left open (issue 34): for a larger model on two 8-GPU nodes, at
which link speed and prompt length does separating prefill and decode start to beat aggregated
serving? `python -m dynamo_lab.advise.crossover` answers it with the predictor, as a Markdown table
(docs/advise.md, "Beyond the lab: when separation pays"). EVERY FIGURE IS AN ESTIMATE, outside what
the validation covered (a 32B model, tensorParallel 2, whole H100s, links and transports the lab
never had, longer prompts, concurrency 16): physics only (docs/predictor.md, Envelope).

The comparison holds the GPUs equal: on Pulumi.two-node-rdma.yaml's cluster (two nodes of 8 whole
80GB GPUs, tests/data/preflight/two-8gpu-rdma.json), Qwen3-32B at tensorParallel 2, 4 aggregated
workers against the best of 1 + 3, 2 + 2 and 3 + 1 prefill + decode workers (separation's own
lever: the split follows the traffic), each group spread even over both nodes (8 GPUs each), at
concurrency 16, prompts with no shared prefix (each pays its whole prefill and moves
its whole KV), 128 output tokens. Swept: the link (1 to 400 Gbit/s at efficiency 0.9) and the KV
transport (UCX over TCP with host buffers, each flow at most the TCP software path; or RDMA, GPU
buffers, at the link), and the prompt (2k, 8k, 32k tokens). Aggregated serving moves no KV, so
its figures do not depend on the link. Each layout is loaded, sized and preflighted against the
saved cluster before it is predicted.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from dataclasses import dataclass
from typing import Optional

from dynamo_lab import stack_files
from dynamo_lab.advise.candidates import AGGREGATED, ONE_NODE, Group, Layout
from dynamo_lab.advise.stack_file import candidate_config
from dynamo_lab.advise.traffic import Traffic
from dynamo_lab.paths import ROOT
from dynamo_lab.predict import cells, pool
from dynamo_lab.predict.envelope import envelope
from dynamo_lab.predict.params import LAB
from dynamo_lab.preflight import cluster_data
from dynamo_lab.preflight.checks import check
from infra.plan import load_stack

BASE = "two-node-rdma"
CLUSTER = "tests/data/preflight/two-8gpu-rdma.json"
LINKS_GBIT = (1, 10, 25, 100, 400)
TRANSPORTS = ("tcp", "rdma")
PROMPTS = (2048, 8192, 32768)
OUTPUT_TOKENS = 128
CONCURRENCY = 16
TP = 2
LINK_EFFICIENCY = 0.9
AGG = Layout(AGGREGATED, (Group("worker", "agg", "gpu-80gb", 4, TP, "even"),))
SPLITS = tuple(Layout(ONE_NODE, (Group("prefill", "prefill", "gpu-80gb", p, TP, "even"),
                                 Group("decode", "decode", "gpu-80gb", 4 - p, TP, "even"))) for p in (1, 2, 3))


@dataclass(frozen=True)
class Result:
    prompt: int
    transport: Optional[str]  # None: aggregated
    link_gbit: Optional[int]
    split: str  # the layout's label
    ttft_p50_ms: float
    requests_per_s: float
    outside: tuple[str, ...]


def config(base: dict, layout: Layout, prompt: int, transport: str = "tcp", link_gbit: int = 100) -> dict:
    """The base stack file with this layout, workload and link (disaggregated: its transport)."""
    traffic = Traffic(prompt, 0, OUTPUT_TOKENS, (1,), (CONCURRENCY,), given=True)
    doc = candidate_config(base, layout, traffic)
    doc["dynamo-lab:sizing"] = {**doc.get("dynamo-lab:sizing", {}),
                                "link": {"rate": f"{link_gbit}gbit", "efficiency": LINK_EFFICIENCY}}
    if layout.kind != AGGREGATED:
        for w in doc["dynamo-lab:workers"]:
            w["kvTransfer"] = ({"transport": "rdma", "bufferDevice": "cuda"} if transport == "rdma"
                               else {"transport": "tcp", "bufferDevice": "cpu"})
    return doc


def sweep(graphs: int, runs: int, workers: Optional[int] = None) -> list[Result]:
    base = stack_files.stack_doc(BASE)
    data = cluster_data.read_file(str(ROOT / CLUSTER))
    cases = [(p, None, None, AGG, config(base, AGG, p)) for p in PROMPTS]
    cases += [(p, t, g, x, config(base, x, p, t, g)) for p in PROMPTS for t in TRANSPORTS for g in LINKS_GBIT
              for x in SPLITS]
    stacks = []
    for *_, doc in cases:
        stack = load_stack("crossover", *stack_files.config_from_doc(doc))  # a ConfigError: the sizing refuses
        report = check(stack, data)
        if not report.fits:
            raise SystemExit(f"preflight refuses {doc['dynamo-lab:workers']}: {report.problems[0].problem}")
        stacks.append(stack)
    jobs = [pool.Job(s.config, s.sizing, 1, CONCURRENCY, LAB, graphs, runs) for s in stacks]
    rows = pool.simulate(jobs, workers)
    return [Result(p, t, g, x.label, row.ttft_p50_ms, row.requests_per_s,
                   envelope(s.resolved, 1, CONCURRENCY).outside)
            for (p, t, g, x, _), s, (row, _) in zip(cases, stacks, rows, strict=True)]


def best(results: list[Result], prompt: int, transport: Optional[str], link: Optional[int], metric: str) -> Result:
    """The best layout of a cell on `metric` (of the splits, for separation)."""
    mine = [r for r in results if (r.prompt, r.transport, r.link_gbit) == (prompt, transport, link)]
    return (min if metric == "ttft_p50_ms" else max)(mine, key=lambda r: getattr(r, metric))


def first_win(results: list[Result], prompt: int, transport: str, metric: str) -> Optional[int]:
    """The slowest link (Gbit/s) from which separation beats aggregated on `metric` at every faster
    link swept, or None."""
    agg = getattr(best(results, prompt, None, None, metric), metric)
    better = {}
    for g in LINKS_GBIT:
        mine = getattr(best(results, prompt, transport, g, metric), metric)
        better[g] = mine < agg if metric == "ttft_p50_ms" else mine > agg
    wins = [g for g in LINKS_GBIT if all(better[h] for h in LINKS_GBIT if h >= g)]
    return wins[0] if wins else None


def _short(label: str) -> str:
    """2 prefill + 2 decode on gpu-80gb (TP 2) -> 2P+2D."""
    words = label.split()
    return f"{words[0]}P+{words[3]}D"


def table(results: list[Result]) -> str:
    lines = ["| prompt | layout | " + " | ".join(f"{g} Gbit/s" for g in LINKS_GBIT) + " | separation first wins |",
             "|---|---|" + "---|" * len(LINKS_GBIT) + "---|"]
    for p in PROMPTS:
        agg = best(results, p, None, None, "ttft_p50_ms")
        lines.append(f"| {p:,} | aggregated, 4 x TP 2 | " + " | ".join(
            [f"{agg.ttft_p50_ms:,.0f} ms, {agg.requests_per_s:.2f}/s"] * len(LINKS_GBIT)) + " | |")
        for t in TRANSPORTS:
            cells_ = []
            for g in LINKS_GBIT:
                fast, busy = best(results, p, t, g, "ttft_p50_ms"), best(results, p, t, g, "requests_per_s")
                cells_.append(f"{fast.ttft_p50_ms:,.0f} ms ({_short(fast.split)}), {busy.requests_per_s:.2f}/s "
                              f"({_short(busy.split)})")
            ttft, rps = first_win(results, p, t, "ttft_p50_ms"), first_win(results, p, t, "requests_per_s")
            wins = (f"TTFT p50: {f'{ttft} Gbit/s' if ttft else 'not within the sweep'}; requests/s: "
                    f"{f'{rps} Gbit/s' if rps else 'not within the sweep'}")
            lines.append(f"| {p:,} | prefill/decode, {t.upper()} | " + " | ".join(cells_) + f" | {wins} |")
    return "\n".join(lines)


def _listed(prompts: list[int]) -> str:
    words = [f"{p:,}" for p in prompts]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def findings(results: list[Result]) -> str:
    """What the table answers, in words: per transport and metric, from which link up separation
    beats aggregated serving, for which prompts (read off the table by first_win, so the words
    cannot disagree with it)."""
    out = []
    for t in TRANSPORTS:
        parts = []
        for metric, name in (("ttft_p50_ms", "TTFT p50"), ("requests_per_s", "requests/s")):
            by_link: dict[Optional[int], list[int]] = {}
            for prompt in PROMPTS:
                by_link.setdefault(first_win(results, prompt, t, metric), []).append(prompt)
            said = [f"from {g} Gbit/s up for {_listed(ps)}" for g, ps in sorted(
                (g, ps) for g, ps in by_link.items() if g is not None)]
            if None in by_link:
                said.append(f"at no link swept for {_listed(by_link[None])}")
            parts.append(f"its {name} {', '.join(said)}")
        out.append(f"- **Over {t.upper()}**, separation beats aggregated serving (tokens a prompt): "
                   + "; ".join(parts) + ".")
    return "\n".join(out)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graphs", type=int, default=cells.SIMULATED_GRAPHS, help="simulated graphs per cell")
    p.add_argument("--runs", type=int, default=cells.RUNS_PER_GRAPH, help="measured runs per graph")
    p.add_argument("--markdown", action="store_true", help="only the table and what it answers, in Markdown "
                   "(docs/advise.md's sample: no date, so the same on any day)")
    args = p.parse_args(argv)
    results = sweep(args.graphs, args.runs)
    if args.markdown:
        print(table(results) + "\n\n" + findings(results))
        return 0
    outside = sorted({why for r in results for why in r.outside})
    print(f"ESTIMATES, outside the validation (physics only): each cell TTFT p50, requests/s; {args.graphs} graph(s) "
          f"x {args.runs} run(s) per cell; `python -m dynamo_lab.advise.crossover --graphs {args.graphs} --runs "
          f"{args.runs}` on {datetime.date.today().isoformat()}\n")
    print(table(results))
    print("\nOutside what the validation covered:\n" + "\n".join(f"- {why}" for why in outside))
    return 0


if __name__ == "__main__":
    sys.exit(main())
