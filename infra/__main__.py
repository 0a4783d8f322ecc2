"""`pulumi up` starts here (Pulumi.yaml `main: infra/`): register the stack's resources.

The Pulumi CLI runs this file with `runpy.run_path` after configuring the runtime; `infra` is
importable because the project is installed in the environment Pulumi uses (Pulumi.yaml,
`toolchain: uv`). Run as `python -m infra` outside the Pulumi CLI, it steps aside for the lab's
command line, `dynamo-lab` (infra/lab/cli.py): the one place the program names the lab.
"""

import sys

from infra import pulumi_runtime

if pulumi_runtime.under_pulumi_cli():
    from infra.program import pulumi_main

    pulumi_main()
else:
    from infra.lab.cli import main

    sys.exit(main())
