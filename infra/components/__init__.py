"""ComponentResources; each turns manifests from a pure builder into Pulumi resources."""


def manifest_body(doc: dict) -> dict:
    """A manifest's fields as typed-resource arguments (the resource class sets apiVersion/kind)."""
    return {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
