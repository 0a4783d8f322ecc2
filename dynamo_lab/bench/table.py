"""`dynamo-lab report`: benchmark results as the lab's table (prefix types x concurrency) and a PNG plot."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Callable, Optional

from dynamo_lab import published
from dynamo_lab.sizing_text import text_table
from infra.errors import UserError


class ReportError(UserError):
    pass

FIGURES = ("ttft_p50_ms", "ttft_p99_ms", "requests_per_s")


def load(paths: list[str]) -> list[dict]:
    lines = []
    for path in paths:
        try:
            content = Path(path).read_text()
        except OSError as exc:
            raise ReportError(f"cannot read {path}: {exc.strerror}") from None
        for n, text in enumerate(content.splitlines(), start=1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ReportError(f"{path}:{n}: not a JSON line ({exc})") from None
            if "error" not in line:
                missing = [k for k in ("stack", "prefix_types", "concurrency", *FIGURES) if k not in line]
                if missing:
                    raise ReportError(f"{path}:{n}: missing {', '.join(missing)}")
            lines.append(line)
    return lines


def aggregate(lines: list[dict]) -> dict[str, dict[tuple[int, int], dict]]:
    """Median over runs per (stack, prefix types, concurrency); failed runs are counted, not averaged."""
    groups: dict[str, dict[tuple[int, int], list[dict]]] = defaultdict(lambda: defaultdict(list))
    for line in lines:
        groups[line["stack"]][(line["prefix_types"], line["concurrency"])].append(line)
    out: dict[str, dict[tuple[int, int], dict]] = {}
    for stack, points in groups.items():
        out[stack] = {}
        for key, runs in points.items():
            ok = [r for r in runs if "error" not in r]
            cell = {"runs": len(ok), "failed": len(runs) - len(ok), "target": runs[0].get("target")}
            for fig in FIGURES:
                cell[fig] = statistics.median(r[fig] for r in ok) if ok else None
            out[stack][key] = cell
    return out


def _fmt(value, digits=0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# predict(stack, prefix_types, concurrency) -> (TTFT p50 ms, requests/s, ITL p99 ms), from the predictor.
# The benchmark's results have no ITL (its job records TTFT and requests/s): the predicted ITL p99
# stands alone, the gap between tokens that separation is run to shorten (docs/predictor.md).
Predictor = Callable[[str, int, int], tuple[float, float, float]]


def table(variants: dict, baseline: Optional[dict], show_published: bool,
          predictor: Optional[Predictor] = None) -> str:
    base_stack, base = next(iter(baseline.items())) if baseline else (None, {})
    blocks = []
    for stack, cells in variants.items():
        # The published and predicted columns give the baseline's figure, then the variant's.
        compared = [base_stack, stack] if base_stack else [stack]
        compared_label = f" {base_stack}/{stack}" if base_stack else ""
        head = ["prefix", "conc"]
        if base_stack:
            head += [f"p50 {base_stack}", f"p50 {stack}", "x", f"p99 {base_stack}", f"p99 {stack}",
                     f"req/s {base_stack}", f"req/s {stack}", "req/s chg"]
        else:
            head += ["TTFT p50 ms", "TTFT p99 ms", "req/s"]
        if show_published:
            head += ["published p50" + compared_label, "published req/s" + compared_label]
        if predictor:
            head += ["predicted p50" + compared_label, "predicted req/s" + compared_label,
                     "predicted ITL p99" + compared_label]
        head += ["runs"]
        rows = []
        for key in sorted(cells):
            v, b = cells[key], base.get(key, {})
            row = [str(key[0]), str(key[1])]
            if base_stack:
                ratio = (v["ttft_p50_ms"] / b["ttft_p50_ms"]) if b.get("ttft_p50_ms") and v["ttft_p50_ms"] else None
                change = ((v["requests_per_s"] / b["requests_per_s"] - 1) * 100
                          if b.get("requests_per_s") and v["requests_per_s"] else None)
                row += [_fmt(b.get("ttft_p50_ms")), _fmt(v["ttft_p50_ms"]), _fmt(ratio, 1) + "x" if ratio else "-",
                        _fmt(b.get("ttft_p99_ms")), _fmt(v["ttft_p99_ms"]),
                        _fmt(b.get("requests_per_s"), 1), _fmt(v["requests_per_s"], 1),
                        f"{change:+.0f}%" if change is not None else "-"]
            else:
                row += [_fmt(v["ttft_p50_ms"]), _fmt(v["ttft_p99_ms"]), _fmt(v["requests_per_s"], 1)]
            if show_published:
                pub = [published.cell(s, *key) for s in compared]
                row += [" / ".join(_fmt(c.ttft_p50_ms) if c else "-" for c in pub),
                        " / ".join(_fmt(c.requests_per_s, 1) if c else "-" for c in pub)]
            if predictor:
                pred = [predictor(s, *key) for s in compared]
                row += [" / ".join(_fmt(p50) for p50, _, _ in pred), " / ".join(_fmt(rps, 1) for _, rps, _ in pred),
                        " / ".join(_fmt(itl, 1) for _, _, itl in pred)]
            row += [str(v["runs"]) + (f" ({v['failed']} failed)" if v["failed"] else "")]
            rows.append(row)
        target = next(iter(cells.values()))["target"]
        blocks.append(f"{stack} ({target}) vs {base_stack or 'no baseline'}: TTFT in ms, median over runs\n"
                      + text_table(head, rows))
    return "\n\n".join(blocks)


def plot(variants: dict, baseline: Optional[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_ttft, ax_rps) = plt.subplots(1, 2, figsize=(11, 4.2))
    series = [(s, c, "-") for s, c in variants.items()] + [(s, c, "--") for s, c in (baseline or {}).items()]
    for stack, cells, style in series:
        for conc in sorted({k[1] for k in cells}):
            xs = sorted(k[0] for k in cells if k[1] == conc)
            label = f"{stack} c{conc}"
            ax_ttft.plot(xs, [cells[(x, conc)]["ttft_p50_ms"] for x in xs], style, marker="o", label=label)
            ax_rps.plot(xs, [cells[(x, conc)]["requests_per_s"] for x in xs], style, marker="o", label=label)
    ticks = sorted({k[0] for _, cells, _ in series for k in cells})
    ax_ttft.set(title="TTFT p50", xlabel="prefix types", ylabel="ms")
    ax_rps.set(title="Throughput", xlabel="prefix types", ylabel="requests/s")
    for ax in (ax_ttft, ax_rps):
        ax.set_xticks(ticks)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("variant (solid) vs baseline (dashed)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(results: list[str], baseline: Optional[str], plot_path: Optional[str], show_published: bool,
         predictor: Optional[Predictor] = None) -> str:
    variants = aggregate(load(results))
    base = aggregate(load([baseline])) if baseline else None
    if not variants:
        raise ReportError("no results in " + ", ".join(results))
    text = table(variants, base, show_published, predictor)
    if plot_path:
        plot(variants, base, plot_path)
        text += f"\n\nplot: {plot_path}"
    return text
