"""`advise --write Pulumi.NAME.yaml`: the recommended layout as a stack file, checked before it lands.

The file is the base stack file's `config:` with the layout's workers (and a given workload),
loaded back from its own text, sized and preflighted against the same cluster data before it
replaces nothing: a file that exists is refused (unless --force), and a file that would not load
is never written. The base stack's secrets are not copied: they are encrypted for that stack
alone (Pulumi's per-stack secrets provider), so the new stack sets its own.
"""

from __future__ import annotations

import os
import re
import tempfile
import textwrap
from pathlib import Path

import yaml

from infra.errors import UserError
from infra.lab import mockrun
from infra.lab.advise.search import Advice, Candidate, secret_keys
from infra.lab.preflight.checks import check
from infra.lab.preflight.cluster_data import ClusterData
from infra.plan import load_stack

NAME = re.compile(r"^Pulumi\.([A-Za-z0-9][A-Za-z0-9_.-]*)\.yaml$")


def stack_name(path: str) -> str:
    """The stack a file is for, from its name: Pulumi reads stack NAME's settings from Pulumi.NAME.yaml."""
    m = NAME.match(Path(path).name)
    if not m:
        raise UserError(f"--write {path}: name it Pulumi.<stack>.yaml (e.g. Pulumi.advised.yaml): Pulumi reads "
                        "a stack's settings only from the file of that name beside Pulumi.yaml")
    return m.group(1)


def refuse_existing(path: str, force: bool) -> None:
    if not Path(path).parent.is_dir():
        raise UserError(f"--write {path}: there is no directory {Path(path).parent}; write the file into the "
                        "project's directory, beside Pulumi.yaml")
    if Path(path).exists() and not force:
        raise UserError(f"--write {path}: the file exists and is left as it is; write another name, or add --force "
                        "to replace it")


def header(a: Advice, c: Candidate, secrets: list[str]) -> str:
    points = len(a.workload.points)
    text = (f"Written by `dynamo-lab advise {a.base}` from {a.source}: the layout it predicted best for "
            f"{a.goal.describe()} over {points} workload point{'s' * (points > 1)}. ESTIMATES, from a simulation "
            f"fitted to one lab's table (docs/advise.md, docs/predictor.md): TTFT p50 {c.mean('ttft_p50_ms'):,.0f} "
            f"ms, p99 {c.mean('ttft_p99_ms'):,.0f} ms, {c.mean('requests_per_s'):.1f} requests/s. Measure it "
            f"(docs/benchmark.md). Everything but `workers`{' and the workload' if a.workload.given else ''} is "
            f"{a.base}'s as it was.")
    if secrets:
        text += (f" Not copied, {a.base}'s secrets ({', '.join(secrets)}): set them for this stack with "
                 f"`pulumi config set --secret KEY VALUE --stack {a.stack}`.")
    return "".join(f"# {line}\n" for line in textwrap.wrap(text, 98, break_long_words=False, break_on_hyphens=False))


def write(path: str, a: Advice, c: Candidate, base: dict, data: ClusterData, force: bool = False) -> None:
    """Write `c` as `path`, after its own text loads, sizes and passes preflight on `data`."""
    refuse_existing(path, force)
    body = header(a, c, secret_keys(base)) + yaml.safe_dump({"config": c.config}, sort_keys=False)
    doc = yaml.safe_load(body)
    raw, secrets = mockrun.config_from_doc(doc["config"])
    stack = load_stack(a.stack, raw, secrets)  # a ConfigError here is a bug: say it, write nothing
    report = check(stack, data)
    if not report.fits:
        raise UserError(f"--write {path}: the written layout failed preflight ({report.problems[0].problem}); "
                        "nothing was written. This is a dynamo-lab bug: please report it")
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(body)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
