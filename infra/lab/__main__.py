"""`python -m infra.lab COMMAND`: the lab's command line (also the `dynamo-lab` console script)."""

import sys

from infra.lab.cli import main

sys.exit(main())
