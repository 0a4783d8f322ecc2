"""`python -m dynamo_lab COMMAND`: the lab's command line (also the `dynamo-lab` console script)."""

from dynamo_lab.cli import entry

entry()
