"""`pulumi up` starts here (Pulumi.yaml `main: infra/`): register the stack's resources.

The Pulumi CLI runs this file with `runpy.run_path` after configuring the runtime; `infra` is
importable because the project is installed in the environment Pulumi uses (Pulumi.yaml,
`toolchain: uv`). Run any other way (`python -m infra`), it only says where to go: the lab's tools
are their own package, `dynamo_lab` (`dynamo-lab`), which the program never imports.
"""

import sys

from infra import pulumi_runtime

if pulumi_runtime.under_pulumi_cli():
    from infra.program import pulumi_main

    pulumi_main()
else:
    sys.exit("infra is the Pulumi program: deploy a stack with `pulumi up --stack STACK`. The lab's tools "
             "(render, sizing, preflight, probe, ...) are `dynamo-lab COMMAND`, also `python -m dynamo_lab "
             "COMMAND` or `python3 dev.py COMMAND`")
