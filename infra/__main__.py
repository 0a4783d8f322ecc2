"""Two entries in one file, kept apart:

- the Pulumi CLI runs this file with `runpy.run_path('infra/', run_name='__main__')` after it has
  configured the runtime (a resource monitor is set): we register the stack's resources;
- `python -m infra ...` runs it with no monitor: we run the offline command-line tools.

The Pulumi CLI puts `infra/` (not the project root) at the head of sys.path, so the root is added
here to make `import infra.*` work in both (FIELD-NOTES, "How the Pulumi CLI starts a Python program").
"""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from pulumi.runtime import settings as _settings  # noqa: E402

if _settings.get_monitor() is not None:
    from infra.program import pulumi_main

    pulumi_main()
else:
    from infra.cli import main

    sys.exit(main())
