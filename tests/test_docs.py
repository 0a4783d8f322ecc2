"""The documentation against the program: what it says the stacks export, and where it sends a reader."""

from __future__ import annotations

import re

from tests.helpers import ROOT, everything_on, run_stack


def _outputs_listed(text: str) -> set[str]:
    start = text.index("Stack outputs: ")
    paragraph = text[start:text.index("\n\n", start)]
    return set(re.findall(r"`([a-zA-Z]+)`", paragraph))


def test_the_stack_outputs_list_names_every_output_the_program_exports():
    # With every optional part on (pre-pull, probe, benchmark), every output there is.
    exported = set(run_stack("cross-server", everything_on("cross-server")).outputs)
    assert {"benchJob", "probeLogs", "modelPullJobs"} <= exported
    assert _outputs_listed((ROOT / "README.md").read_text()) == exported
