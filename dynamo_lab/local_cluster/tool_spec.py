"""What a pinned cluster tool is: its release, the Go module and main packages it is built from, what
the build writes, how a found binary is recognized. The pins themselves are tools.py's; how a tool
is trusted (tool_trust.py) and built (tool_build.py) both read this, and neither imports tools.py."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Tool:
    name: str                        # the wrapper's directory (tools/cluster/<name>) and cache key
    version: str                     # the pinned release, as its project names it
    module: str                      # the Go module that holds its main package(s)
    module_version: str              # the version of `module` the wrapper requires
    binaries: tuple[str, ...]        # what the build writes into bin/
    packages: tuple[str, ...] = ()   # the main packages to build
    ldflags: tuple[str, ...] = ()
    pgo_off: bool = False
    version_args: tuple[str, ...] = ("--version",)
    accept: str = ""                 # regex the --version output of a found binary must match
    found_in: str = ""               # "path": look on PATH; "k8s-dir": the test-binaries directory
    unavailable: str = ""            # why it cannot be built here; empty when it can
    source_sum: str = ""             # the module zip's h1: hash, where its source is copied and built
    order: int = 0                   # build order: the most valuable first

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"
