"""Where the checkout is: the one definition the lab tools read (never `Path(__file__).parents[N]`)."""

from __future__ import annotations

from pathlib import Path

# dynamo_lab/paths.py -> the project root, which holds pyproject.toml, the stack files and docs/.
ROOT = Path(__file__).resolve().parents[1]
