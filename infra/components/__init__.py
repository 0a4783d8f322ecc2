"""ComponentResources: each turns the manifests of a pure builder into Pulumi resources.

Every component takes `(name, args, opts)`: `args` holds only the values it uses, and ordering
comes in through `opts.depends_on`. Pulumi does not pass a component's depends_on on to its
children, so `after()` does: a child created with it waits for everything the component waits for.
"""

from __future__ import annotations

from typing import Any, Optional

import pulumi


def manifest_body(doc: dict[str, Any]) -> dict[str, Any]:
    """A manifest's fields as typed-resource arguments (the resource class sets apiVersion/kind)."""
    return {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def after(component: pulumi.ComponentResource, opts: Optional[pulumi.ResourceOptions],
          *more: pulumi.Resource) -> pulumi.ResourceOptions:
    """Options for a child: parented to `component`, after the component's own depends_on and `more`."""
    waits = _as_list(opts.depends_on if opts else None)
    return pulumi.ResourceOptions(parent=component, depends_on=[*waits, *more])
