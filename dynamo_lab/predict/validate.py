"""The predictor against the write-up: every published cell, and the cross-server first requests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from dynamo_lab import published, stack_files
from dynamo_lab.predict import cells
from dynamo_lab.predict.params import LAB, LabParams
from infra import units
from infra.catalogue import DEFAULT_GPU_CLASSES, lab_effective_tflops
from infra.config.schema import GpuClass, StackConfig
from infra.errors import UserError
from infra.sizing import StackSizing

# The stacks whose steady-state cells the write-up published; cross-server has only first requests.
TABLE_STACKS = ("kv-routing", "same-server")


@dataclass(frozen=True)
class Validation:
    errors: list[cells.Error]
    first_c4: list[float]  # cross-server, concurrency 4: TTFT of the first 2 requests, ms
    first_c1: list[float]  # cross-server, concurrency 1: TTFT of the first 4 requests, ms
    # The same, once earlier requests warmed the decode workers and the prefill worker restarted.
    after_c4: list[float]
    after_c1: list[float]

    def as_dict(self) -> dict:
        return {"cells": [{**e.__dict__, "relative": e.relative} for e in self.errors],
                "cross_server_first_requests_ms": {"concurrency_4": self.first_c4, "concurrency_1": self.first_c1},
                "cross_server_first_requests_after_earlier_ms": {"concurrency_4": self.after_c4,
                                                                 "concurrency_1": self.after_c1}}


def lab_cards(cfg: StackConfig, prefill_efficiency: float) -> StackConfig:
    """`cfg` with each of its GPU classes that is a lab class (infra/catalogue.py DEFAULT_GPU_CLASSES,
    by its card's figures) at `prefill_efficiency` of its peak: how the fit varies the lab's one
    prefill efficiency. The same config where the efficiency is the catalogue's."""
    classes = {name: cls.model_copy(update={"effective_tflops": lab_effective_tflops(cls.peak_tflops,
                                                                                      prefill_efficiency)})
               if _is_lab_card(cls) else cls for name, cls in cfg.gpu_classes.items()}
    if all(classes[n].effective_tflops == c.effective_tflops for n, c in cfg.gpu_classes.items()):
        return cfg
    return cfg.model_copy(update={"gpu_classes": classes})


def _is_lab_card(cls: GpuClass) -> bool:
    return any(cls.peak_tflops == d["peakTflops"] and cls.memory == units.parse_memory(d["memory"])
               for d in DEFAULT_GPU_CLASSES.values())


def lab_stacks() -> dict[str, tuple[StackConfig, StackSizing]]:
    """The stacks the write-up published, as this project ships them: name -> (config, sizing)."""
    return {name: (s.config, s.sizing) for name in sorted(published.TABLE) for s in [stack_files.load(name)]}


def validate(stacks: dict[str, tuple[StackConfig, StackSizing]], lab: LabParams = LAB) -> Validation:
    """`stacks`: name -> (config, sizing) for kv-routing, same-server and cross-server."""
    errs = [e for name in TABLE_STACKS
            for e in cells.errors(name, cells.predict(lab_cards(stacks[name][0], lab.prefill_efficiency),
                                                      stacks[name][1], lab, lab.pool_scale.get(name, 1.0)))]
    cross = (lab_cards(stacks["cross-server"][0], lab.prefill_efficiency), stacks["cross-server"][1])
    first = [cells.first_requests(*cross, prefix_types=2, concurrency=c, count=n, lab=lab, after_earlier=after)
             for after in (False, True) for c, n in ((4, 2), (1, 4))]
    return Validation(errs, *first)


def check_mode(stack: Optional[str], rate: Optional[list[float]], json: bool, validate: bool, calibrate: bool,
               cross_validate: bool) -> None:
    """`predict`'s flags that cannot go together, refused (UserError) before anything runs: a mode
    (--validate, --calibrate, --cross-validate) runs the lab's own stacks' published cells, so a
    stack or --rate beside it would be silently ignored."""
    modes = [flag for flag, on in (("--validate", validate), ("--calibrate", calibrate),
                                   ("--cross-validate", cross_validate)) if on]
    if len(modes) > 1 or (modes and (stack or rate)):
        given = modes + ([f"the stack {stack}"] if stack else []) + (["--rate"] if rate else [])
        raise UserError(f"{' and '.join(given)} cannot go together: --validate, --calibrate and --cross-validate "
                        "each run the lab's own stacks' published cells, without a stack or --rate; give one of them "
                        "alone, or a stack (with --rate if wanted)")
    if (calibrate or cross_validate) and json:
        raise UserError(f"{modes[0]} has no --json: it prints constants and errors as text; drop --json")
