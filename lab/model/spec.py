"""The lab model: what a lab is, independent of how it is realised.

Nothing here knows about Docker. Drivers turn a :class:`LabSpec` into containers,
inventories or compose files; the names and labels of Docker objects live with the Docker
driver (lab/nodes/labels.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass

from lab.errors import SpecError

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
MEMORY_PATTERN = re.compile(r"^(\d+(?:\.\d+)?)([kmg]?)b?$", re.IGNORECASE)
DEFAULT_NAME = "default"
# A node that runs a small DDP job needs about this much; used to refuse labs the host cannot hold.
MIN_NODE_MEMORY = 512 * 1024**2
MAX_NODES = 64
MASTER_PORT = 29500
SHARED_MOUNT = "/lab/shared"
EXERCISES_MOUNT = "/lab/exercises"
GPU_MODES = ("auto", "none", "all")
IMAGE_CHOICES = ("auto", "host")  # host: the host's own Python environment, mounted read-only (lab/host_image.py)


def parse_memory(text: str) -> int:
    """'2g', '512m', '1.5G' -> bytes."""
    match = MEMORY_PATTERN.match(text.strip())
    if not match:
        raise SpecError(f"memory '{text}' is not a size", "use a number with a unit, like 512m or 2g")
    number, unit = float(match.group(1)), match.group(2).lower()
    value = int(number * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit])
    if value < 64 * 1024**2:
        raise SpecError(f"memory '{text}' is below 64m", "give each node at least 512m to run torch")
    return value


def format_bytes(value: int | None) -> str:
    if not value:
        return "-"
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value >= size:
            return f"{value / size:.1f} {unit}".replace(".0 ", " ")
    return f"{value} B"


def parse_gpus(text: str) -> str:
    """--gpus: 'auto', 'none', 'all' or a positive count per node, normalised; anything else is a SpecError."""
    value = str(text).strip().lower()
    if value in GPU_MODES or (value.isdigit() and int(value) > 0):
        return str(int(value)) if value.isdigit() else value
    raise SpecError(f"--gpus '{text}' is not auto, none, all or a positive number",
                    "use --gpus auto (GPUs when the host has any), none, all, or a count per node like --gpus 1")


def validate_name(name: str) -> str:
    if not NAME_PATTERN.match(name or ""):
        raise SpecError(
            f"lab name '{name}' is not allowed",
            "use 1-31 lowercase letters, digits or '-', starting with a letter",
        )
    return name


@dataclass(frozen=True)
class Node:
    """One simulated machine of the lab."""

    lab: str
    index: int
    gpus: tuple[str, ...] = ()

    @property
    def hostname(self) -> str:
        return f"node{self.index}"


@dataclass(frozen=True)
class LabSpec:
    """Everything that defines a lab; two labs with equal specs are interchangeable."""

    name: str = DEFAULT_NAME
    nodes: int = 2
    nproc_per_node: int | None = None  # None: each exercise uses its own default
    cpus: float | None = None
    memory: int | None = None
    image: str = "auto"
    gpus: str = "none"
    net_admin: bool = False  # only granted when asked for: `lab fault delay` needs it for tc netem

    def __post_init__(self):
        validate_name(self.name)
        if not isinstance(self.nodes, int) or self.nodes < 1:
            raise SpecError(f"--nodes must be at least 1, got {self.nodes}", "try --nodes 2")
        if self.nodes > MAX_NODES:
            raise SpecError(f"--nodes {self.nodes} is more than the {MAX_NODES} a lab supports", "try --nodes 2")
        if self.nproc_per_node is not None and not 1 <= self.nproc_per_node <= 64:
            raise SpecError(f"--nproc-per-node must be 1..64, got {self.nproc_per_node}", "try --nproc-per-node 2")
        if self.cpus is not None and self.cpus <= 0:
            raise SpecError(f"--cpus must be positive, got {self.cpus}", "try --cpus 1")
        if self.image not in IMAGE_CHOICES:
            raise SpecError(f"--image '{self.image}' is not one of {', '.join(IMAGE_CHOICES)}", "try --image host")
        object.__setattr__(self, "gpus", parse_gpus(self.gpus))  # frozen: normalise in place

    def node_list(self) -> list[Node]:
        return [Node(self.name, index) for index in range(self.nodes)]

    @property
    def master_addr(self) -> str:
        return "node0"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "LabSpec":
        known = {key: data[key] for key in cls.__dataclass_fields__ if key in data}
        return cls(**known)

    def fingerprint(self) -> str:
        """Short hash of the spec; stored on every object so `lab up` can tell same from different."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def check_fits(self, host_cpus: int, host_memory: int) -> None:
        """Refuse a lab the host cannot hold, before anything is created."""
        per_node = self.memory or MIN_NODE_MEMORY
        if self.nodes * per_node > host_memory:
            fit = max(1, host_memory // per_node)
            raise SpecError(
                f"{self.nodes} nodes need {format_bytes(self.nodes * per_node)} but this host has "
                f"{format_bytes(host_memory)}",
                f"use --nodes {fit} or less, or a smaller --memory",
            )
        if self.cpus is not None and self.cpus > host_cpus:
            raise SpecError(f"--cpus {self.cpus} is more than this host's {host_cpus} cores", f"use --cpus {host_cpus} or less")
