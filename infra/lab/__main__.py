"""`python -m infra.lab COMMAND`: the lab's command line (also the `dynamo-lab` console script)."""

from infra.lab.cli import entry

entry()
