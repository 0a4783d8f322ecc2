"""`advise --write Pulumi.NAME.yaml`: the recommended layout as a stack file, checked before it lands.

The file is the base stack file's `config:` with the layout's workers (and a given traffic),
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

from dynamo_lab import stack_files
from dynamo_lab.advise.search import Advice, Candidate
from dynamo_lab.advise.stack_file import StackDoc, secret_keys
from dynamo_lab.predict.text import decode_ms
from dynamo_lab.predict.validate import TABLE_STACKS
from dynamo_lab.preflight.cluster_data import ClusterData
from dynamo_lab.preflight.run import check
from infra.errors import UserError
from infra.plan import load_stack

NAME = re.compile(r"^Pulumi\.([A-Za-z0-9][A-Za-z0-9_.-]*)\.yaml$")


def target(path: str, root: Path) -> Path:
    """Where `--write PATH` goes: a bare file name into the project's directory (beside Pulumi.yaml,
    where Pulumi and dynamo-lab read stack files), a path only if it is there."""
    given = Path(path)
    out = root / given if given.parent == Path(".") else given
    if out.parent.resolve() != root.resolve():
        raise UserError(f"--write {path}: write the stack file into the project's directory, {root}, beside "
                        f"Pulumi.yaml, where Pulumi reads stack files: --write {given.name}")
    return out


def stack_name(path: str) -> str:
    """The stack a file is for, from its name: Pulumi reads stack NAME's settings from Pulumi.NAME.yaml."""
    m = NAME.match(Path(path).name)
    if not m:
        raise UserError(f"--write {path}: name it Pulumi.<stack>.yaml (e.g. Pulumi.advised.yaml): Pulumi reads "
                        "a stack's settings only from the file of that name beside Pulumi.yaml")
    return m.group(1)


def refuse_existing(path: Path, force: bool, base: str) -> None:
    """Refuse a file advise must not write: an existing one (without --force), the base stack's own
    (its secrets, encrypted for it, would be lost) and the lab's stacks (the error is measured with them)."""
    name = stack_name(str(path))
    if name == base:
        raise UserError(f"--write {path.name}: that is {base}'s own file, the base: its secrets are encrypted for it "
                        "and advise does not copy them. Write a new stack (--write Pulumi.advised.yaml) and copy "
                        f"its workers into {path.name} by hand if you want them there")
    if name in TABLE_STACKS:
        raise UserError(f"--write {path.name}: {name} is one of the lab's stacks ({', '.join(TABLE_STACKS)}) the "
                        "predictor's error is measured with; write a new stack (--write Pulumi.advised.yaml)")
    if path.exists() and not force:
        raise UserError(f"--write {path.name}: the file exists and is left as it is; write another name, or add "
                        "--force to replace it")
    if not os.access(path.parent, os.W_OK):
        raise UserError(f"--write {path.name}: {path.parent} is not writable by this user")


def header(a: Advice, c: Candidate, secrets: list[str]) -> str:
    points = len(a.traffic.points)
    text = (f"Written by `dynamo-lab advise {a.base}` from {a.source}: the layout ranked first for "
            f"{a.goal.describe()} over {points} workload point{'s' * (points > 1)}, {a.first_is}. ESTIMATES, from a "
            f"simulation fitted to one lab's table (docs/advise.md, docs/predictor.md): TTFT p50 "
            f"{c.mean('ttft_p50_ms'):,.0f} ms, p99 {c.mean('ttft_p99_ms'):,.0f} ms, ITL p99 "
            f"{decode_ms(c.mean('itl_p99_ms'))} ms, goodput {c.mean('goodput_requests_per_s'):.1f} of "
            f"{c.mean('requests_per_s'):.1f} requests/s"
            + (f" (physics only, outside what the validation covered: {'; '.join(c.envelope.outside)})"
               if c.envelope.extrapolated else "") + ". Measure it "
            f"(docs/benchmark.md). Everything but `workers`{' and the workload' if a.traffic.given else ''} is "
            f"{a.base}'s as it was.")
    if secrets:
        text += (f" Not copied, {a.base}'s secrets ({', '.join(secrets)}): set them for this stack with "
                 f"`pulumi config set --secret KEY VALUE --stack {a.stack}`.")
    return "".join(f"# {line}\n" for line in textwrap.wrap(text, 98, break_long_words=False, break_on_hyphens=False))


def write(path: Path, a: Advice, c: Candidate, base: StackDoc, data: ClusterData, force: bool = False) -> None:
    """Write `c` as `path`, after its own text loads, sizes and passes preflight on `data`."""
    refuse_existing(path, force, a.base)  # again: the command checked before its search, which takes seconds
    body = header(a, c, secret_keys(base)) + yaml.safe_dump({"config": c.config}, sort_keys=False)
    doc = stack_files.parse_yaml(body, path.name)  # read back as every command will read the file
    raw, secrets = stack_files.config_from_doc(doc["config"])
    stack = load_stack(a.stack, raw, secrets)  # a ConfigError here is a bug: say it, write nothing
    report = check(stack, data)
    if not report.fits:
        raise UserError(f"--write {path.name}: the written layout failed preflight ({report.problems[0].problem}); "
                        "nothing was written. This is a dynamo-lab bug: please report it")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise UserError(f"--write {path.name}: cannot write in {path.parent}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w") as f:
            f.write(body)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
