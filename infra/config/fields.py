"""Single values of a stack file, read the way the system that consumes them reads them.

Each annotated type parses one value or raises ValueError with what it would have meant and what
to write: Kubernetes quantities (`units`), DNS labels and label keys/values (the API server's
rules), exact release versions (Helm pins), image tags (the Dynamo operator's rule), UCX
transport lists (UCX's names), node paths and address ranges (NetworkPolicy's ipBlock).
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from typing import Annotated, Optional

from pydantic import AfterValidator, BeforeValidator

from infra import units


class KeyProblem(ValueError):
    """A check that needs the whole section (so runs on the section) but is about one of its keys:
    the stack file's error names that key (`model.name`), not the section (`model`), and an item of a
    list key by its index (`values`, 1: `values[1]`)."""

    def __init__(self, key: str, message: str, index: Optional[int] = None) -> None:
        super().__init__(message)
        # Where under the section, as a pydantic location: the stack file's spelling (camelCase alias).
        self.loc: tuple[str | int, ...] = (key,) if index is None else (key, index)


def did_you_mean(name: str, choices: list[str]) -> str:
    """A hint naming the closest choice ("; did you mean 'x'?"), or "" when none is close."""
    close = difflib.get_close_matches(name, choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


# --- Quantities ---------------------------------------------------------------------------------

# Memory and sizes: whole bytes, at least 1Mi (a number without a suffix is bytes, as in Kubernetes).
Bytes = Annotated[int, BeforeValidator(units.parse_memory)]
# Bytes per second: at least 1 MB/s (`1200M` = 1.2 GB/s).
Throughput = Annotated[int, BeforeValidator(units.parse_throughput)]
# CPU, kept in Kubernetes' canonical form (`2`, `500m`).
Cpu = Annotated[str, BeforeValidator(lambda v: units.format_cpu(units.parse_cpu(v)))]
LinkRate = Annotated[int, BeforeValidator(units.parse_rate_bits)]

# --- Names --------------------------------------------------------------------------------------

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def dns_label(value: str, max_length: int = 63) -> str:
    """A Kubernetes DNS-1123 label (names of namespaces, Services, graph components)."""
    if len(value) > max_length or not _DNS_LABEL.match(value):
        fixed = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")[:max_length].strip("-") or "x"
        raise ValueError(f"{value!r} is not a DNS label (lowercase letters, digits and '-', starting and ending "
                         f"with a letter or digit, at most {max_length} characters); write e.g. {fixed!r}")
    return value


def label_key(key: str) -> str:
    """A label key as the API server checks it: [prefix/]name, name <= 63, prefix a DNS subdomain."""
    prefix, _, name = key.rpartition("/")
    if (not name or len(name) > 63 or not _LABEL_NAME.match(name)
            or (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)))):
        raise ValueError(f"{key!r} is not a Kubernetes label key ([prefix/]name, e.g. nvidia.com/gpu.memory "
                         "or kubernetes.io/hostname)")
    return key


def label_value(value: str) -> str:
    if len(value) > 63 or (value and not _LABEL_NAME.match(value)):
        raise ValueError(f"{value!r} is not a Kubernetes label value (at most 63 letters, digits, '-', '_' "
                         "or '.', starting and ending with a letter or digit)")
    return value


def resource_name(name: str) -> str:
    """An extended resource name such as nvidia.com/gpu (a domain, '/', a name)."""
    domain, sep, short = name.partition("/")
    if not sep or not _DNS_SUBDOMAIN.match(domain) or not _LABEL_NAME.match(short):
        raise ValueError(f"{name!r} is not an extended resource name (a domain, '/', a name); write the one a "
                         "device plugin advertises, e.g. nvidia.com/gpu, nvidia.com/gpu.shared (renamed time-sliced "
                         "GPUs) or rdma/rdma_shared_device_a (an RDMA device)")
    return name


# --- Versions -----------------------------------------------------------------------------------

SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


def exact_release(version: str) -> str:
    """A chart version that names one release: Helm would resolve a range to whatever is newest."""
    if not SEMVER.match(version):
        kind = "a range" if re.search(r"[\^~*xX<>=|, ]", version) else "not a release version"
        raise ValueError(f"{version!r} is {kind}; the stack pins one exact chart release so every `pulumi up` "
                         "installs the same chart. Write e.g. 1.6.2")
    return version


def operator_image(image: str) -> str:
    """The Dynamo operator's rule: the tag parses as a semantic version, with an optional leading v."""
    ref = image.split("@", 1)[0]
    repo, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        tag, repo = "", ref
    if not SEMVER.match(tag.removeprefix("v")):
        raise ValueError(
            f"image tag {tag or '(none)'} is not a semantic version, and the Dynamo admission webhook rejects "
            f"images whose tag does not parse as one (an optional leading v is allowed). "
            f"Before: {image}  After: {repo}:1.6.2")
    return image


# --- UCX transports -----------------------------------------------------------------------------

# UCX transport names (UCX_TLS), and what the aliases expand to. Only these cross from one pod to
# another; shared-memory transports and `self` stay inside a host's IPC namespace or a process.
NETWORK_TLS = {"tcp", "rc", "rc_v", "rc_x", "rc_mlx5", "ud", "ud_v", "ud_x", "ud_mlx5", "dc", "dc_x", "dc_mlx5"}
LOCAL_TLS = {"self", "posix", "sysv", "cma", "knem", "xpmem"}
GPU_TLS = {"cuda_copy", "cuda_ipc", "gdr_copy", "rocm_copy", "rocm_ipc", "rocm_gdr"}
ALIASES = {
    "all": NETWORK_TLS | LOCAL_TLS | GPU_TLS,
    "sm": {"posix", "sysv", "cma", "knem", "xpmem"}, "shm": {"posix", "sysv", "cma", "knem", "xpmem"},
    "mm": {"posix", "sysv", "xpmem"},
    "ib": {"rc", "rc_v", "rc_x", "ud", "ud_v", "ud_x", "dc", "dc_x"},
    "rc": {"rc_v", "rc_x"}, "ud": {"ud_v", "ud_x"}, "dc": {"dc_x"},
    "cuda": {"cuda_copy", "cuda_ipc", "gdr_copy"}, "rocm": {"rocm_copy", "rocm_ipc", "rocm_gdr"},
}
KNOWN_TLS = NETWORK_TLS | LOCAL_TLS | GPU_TLS | set(ALIASES)
# Transports that can move GPU memory directly (RDMA with GPUDirect, CUDA copies).
GPU_CAPABLE_TLS = (NETWORK_TLS - {"tcp"}) | GPU_TLS


def ucx_tls(value: str) -> str:
    """A UCX_TLS list: comma-separated transport names, or `^names` for all but those."""
    names = [t.strip() for t in value.removeprefix("^").split(",")]
    if not value.strip() or not any(names):
        raise ValueError(f"{value!r} names no transport, so UCX could not connect anything; write the "
                         "workers' transports, e.g. tcp,self (TCP, the lab's) or rc,cuda_copy (RDMA)")
    for name in names:
        if name not in KNOWN_TLS:
            raise ValueError(f"{name!r} is not a UCX transport{did_you_mean(name, sorted(KNOWN_TLS))} UCX would "
                             f"refuse to start. Known: {', '.join(sorted(KNOWN_TLS))}")
    return value


def expand_tls(value: str) -> set[str]:
    """The transports a UCX_TLS value enables, aliases expanded (`^x` means all but x)."""
    def expand(names):
        out = set()
        for n in names:
            out |= ALIASES.get(n, set()) | ({n} if n not in ("all",) else set())
        return out
    names = [t.strip() for t in value.removeprefix("^").split(",") if t.strip()]
    return ALIASES["all"] - expand(names) if value.startswith("^") else expand(names)


def cidr(value: str) -> str:
    """An address range as a NetworkPolicy's ipBlock takes it: a network address, no host bits."""
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a CIDR a NetworkPolicy's ipBlock takes ({exc}); write e.g. "
                         "192.168.1.0/24 or 10.0.0.5/32") from None


UcxTls = Annotated[str, AfterValidator(ucx_tls)]
Cidr = Annotated[str, AfterValidator(cidr)]
DnsLabel = Annotated[str, AfterValidator(dns_label)]
OptionalDnsLabel = Optional[DnsLabel]
LabelKey = Annotated[str, AfterValidator(label_key)]
ExactRelease = Annotated[str, AfterValidator(exact_release)]
# Text only: anything else is left to the str type, which refuses it as not text.
OperatorImage = Annotated[str, BeforeValidator(lambda v: operator_image(v) if isinstance(v, str) else v)]
ResourceName = Annotated[str, AfterValidator(resource_name)]


def node_path(path: str) -> str:
    """An absolute node path in the one form the node's kernel resolves it to without following a
    link: duplicate and trailing slashes and `.` components dropped (`//a/./b/` is `/a/b`). A
    `..` is refused before this (the API server rejects a hostPath holding one); symbolic links
    live on the node and cannot be seen from a stack file."""
    return "/" + "/".join(part for part in path.split("/") if part not in ("", "."))


def vllm_int(value: str) -> Optional[int]:
    """An integer flag's value as vLLM reads it (vLLM 0.31.0 `utils/argparse_utils.py`,
    `human_readable_int`): 2048; a decimal suffix k/m/g/t (1000s, decimals allowed: 2.5k is 2,500);
    a binary suffix K/M/G/T (1024s, whole numbers only); else Python's int(). None: not a
    non-negative count (vLLM's -1 and `auto` for --max-model-len ask it to pick one)."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * 10 ** (3 * "kmgt".index(suffix) + 3))
        return None if "." in number else int(number) * 2 ** (10 * "KMGT".index(suffix) + 10)
    try:
        number = int(value)
    except ValueError:
        return None
    return number if number >= 0 else None
