"""`dynamo-lab advise`'s steps between the command line and its output, in the order they run.

`prepare` does everything that can refuse the arguments before anything is read beyond the base
stack file (exit 2, nothing written): --force without --write, the --write target, the given
traffic. `advise` then reads the cluster, measures the predictor's error and searches; `write`
writes the winner. The command line (cli.py) parses and prints, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from dynamo_lab import stack_files
from dynamo_lab.advise import inputs, search, uncertainty, write
from dynamo_lab.advise.inputs import Base, Goal
from dynamo_lab.advise.search import Advice
from dynamo_lab.advise.traffic import Traffic
from dynamo_lab.preflight import cluster_data
from dynamo_lab.preflight.cluster_data import ClusterData
from infra.errors import UserError


@dataclass(frozen=True)
class AdviseArgs:
    base: Base
    name: str  # the stack every candidate (and the written file) is loaded as
    out: Optional[Path]  # --write's file
    force: bool
    source: Optional[str]  # --from FILE; None: the base stack's cluster, live
    traffic: Traffic  # checked
    goal: Goal


def prepare(stack: str, write_to: Optional[str], force: bool, source: Optional[str], goal: Goal,
            **traffic: Optional[object]) -> AdviseArgs:
    """The request, or a UserError for arguments no search should start with. `traffic`: the
    command line's --input-tokens ... --concurrency and --rate (`rates`), None where not given
    (inputs.given_traffic)."""
    if force and not write_to:
        raise UserError("--force replaces the file --write names: add --write Pulumi.NAME.yaml, or drop --force")
    name = write.stack_name(write_to) if write_to else stack
    out = write.target(write_to, stack_files.project_root()) if write_to else None
    if out is not None:
        write.refuse_existing(out, force, stack)
    base = inputs.read_base(stack)
    chosen = inputs.given_traffic(base, **traffic) or inputs.traffic_of(base.config)
    inputs.check_traffic(base, chosen)
    return AdviseArgs(base, name, out, force, source, chosen, goal)


def measured_error() -> uncertainty.Uncertainty:
    """The predictor's error against the lab's table, from the lab's own stacks as shipped."""
    def lab_stack(name: str):
        stack = stack_files.load(name)
        return stack.config, stack.sizing

    try:
        return uncertainty.measured(lab_stack)
    except UserError as exc:
        raise UserError("advise reports the predictor's error against the lab's table, which it measures with the "
                        f"lab's own stacks, kv-routing and same-server, as this project ships them: {exc}") from None


def advise(req: AdviseArgs, progress: Callable[[str], None]) -> tuple[Advice, ClusterData]:
    """The cluster read (live, read-only, or --from), the error measured, the search: its advice and
    the cluster data, which `write` checks the written file against."""
    data = cluster_data.read_file(req.source) if req.source else cluster_data.read_live(req.base.config.target)
    measured = measured_error()
    return search.search(req.base, req.name, data, req.traffic, req.goal, measured, progress=progress), data


def write_winner(req: AdviseArgs, advice: Advice, data: ClusterData) -> None:
    """--write: the winner as req.out, checked before it lands (write.py)."""
    write.write(req.out, advice, advice.winner, req.base.doc, data, force=req.force)
