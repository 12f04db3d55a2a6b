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
# What a node holds, measured with docker stats (bench/RESULTS.md): ~8 MiB idle, and ~192 MiB for each process that
# imported torch and joined a gloo group (exercise05: 363 MiB a node at 1 worker + torchrun's agent, 574 MiB at 2 +
# agent). Used to refuse labs the host cannot hold.
PROCESS_MEMORY = 192 * 1024**2
DEFAULT_NPROC_PER_NODE = 2  # what most exercises start on a node when --nproc-per-node is not given
MAX_NODES = 64
MASTER_PORT = 29500
SHARED_MOUNT = "/lab/shared"
EXERCISES_MOUNT = "/lab/exercises"
GPU_MODES = ("auto", "none", "all")
IMAGE_CHOICES = ("auto", "host")  # host: the host's own Python environment, mounted read-only (lab/host_image.py)
# Anything else is the user's own image (lab/nodes/user_image.py), named as Docker names images.
IMAGE_REFERENCE = re.compile(r"^(?:[a-zA-Z0-9.-]+(?::\d+)?/)?[a-z0-9][a-z0-9._/-]*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
                             r"(?:@sha256:[0-9a-f]{64})?$")
SCHEDULERS = ("none", "slurm")  # slurm: the nodes form a Slurm cluster (lab/nodes/slurm.py)
# Named link profiles. Rate only: the lab's bridge already has a round trip of tens of microseconds, about
# what a switched datacenter LAN has, and a delay needs netem, which not every kernel has.
LINK_PROFILES = {"ethernet-1g": "1gbit", "ethernet-10g": "10gbit", "ethernet-100g": "100gbit"}
RATE_UNITS = {"kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}  # tc's spelling, powers of ten
TIME_UNITS = {"us": 1, "ms": 1000, "s": 1000**2}
RATE_PATTERN = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit|tbit)$")
TIME_PATTERN = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)$")
LOSS_PATTERN = re.compile(r"^(\d+(?:\.\d+)?)%$")
MIN_LINK_RATE = 10**6  # below 1 mbit a rendezvous or an ssh login already times out
LINK_HINT = ("use RATE[:DELAY[:JITTER]][:LOSS%] like 10gbit, 1gbit:200us or 1gbit:200us:20us:0.1%, "
             f"or one of {', '.join(LINK_PROFILES)}")


def parse_size(text: str) -> int | None:
    """'2g', '512m', '1.5G' -> bytes; None when the text is not a size."""
    match = MEMORY_PATTERN.match(text.strip())
    if not match:
        return None
    number, unit = float(match.group(1)), match.group(2).lower()
    return int(number * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit])


def parse_memory(text: str) -> int:
    """'2g', '512m', '1.5G' -> bytes."""
    value = parse_size(text)
    if value is None:
        raise SpecError(f"memory '{text}' is not a size", "use a number with a unit, like 512m or 2g")
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


@dataclass(frozen=True)
class LinkProfile:
    """How traffic between two nodes is shaped: a rate and, optionally, one-way delay, jitter and loss."""

    rate_bps: int  # bits per second
    delay_us: float = 0
    jitter_us: float = 0
    loss_percent: float = 0

    @property
    def needs_netem(self) -> bool:
        """Delay, jitter and loss are netem's; a rate alone is a token bucket's (tbf)."""
        return bool(self.delay_us or self.jitter_us or self.loss_percent)

    @property
    def rate_bytes_per_second(self) -> float:
        return self.rate_bps / 8

    def text(self) -> str:
        """The normalised spelling, e.g. '1gbit:200us:20us:0.1%'; parse_link(text()) gives this profile back."""
        parts = [format_rate(self.rate_bps)]
        if self.delay_us:
            parts.append(format_time(self.delay_us))
        if self.jitter_us:
            parts.append(format_time(self.jitter_us))
        if self.loss_percent:
            parts.append(f"{self.loss_percent:g}%")
        return ":".join(parts)


def format_rate(bps: float) -> str:
    """10**9 -> '1gbit', 2.5 * 10**9 -> '2500mbit': the largest tc unit that keeps the number whole."""
    for unit, size in sorted(RATE_UNITS.items(), key=lambda item: -item[1]):
        if bps >= size and bps % size == 0:
            return f"{bps // size:.0f}{unit}"
    return f"{bps / 1000:g}kbit"


def format_time(us: float) -> str:
    for unit, size in sorted(TIME_UNITS.items(), key=lambda item: -item[1]):
        if us >= size and us % size == 0:
            return f"{us // size:.0f}{unit}"
    return f"{us:g}us"


def parse_link(text: str) -> LinkProfile:
    """'10gbit', '1gbit:200us', '1gbit:200us:20us:0.1%' or a named profile -> LinkProfile; else a SpecError.

    After the rate come times (first the one-way delay, then its jitter) and a loss ending in '%', in that order.
    """
    raw = str(text).strip().lower()
    raw = LINK_PROFILES.get(raw, raw)
    rate_text, *rest = raw.split(":")
    rate = RATE_PATTERN.match(rate_text)
    if not rate:
        raise SpecError(f"--link '{text}': '{rate_text}' is not a rate", LINK_HINT)
    rate_bps = round(float(rate.group(1)) * RATE_UNITS[rate.group(2)])
    if rate_bps < MIN_LINK_RATE:
        raise SpecError(f"--link '{text}': a rate below 1mbit leaves the nodes unable to meet", "use 1mbit or more")
    times, loss = [], 0.0
    for part in rest:
        time_match, loss_match = TIME_PATTERN.match(part), LOSS_PATTERN.match(part)
        if time_match and not loss and len(times) < 2:
            times.append(float(time_match.group(1)) * TIME_UNITS[time_match.group(2)])
        elif loss_match and not loss and float(loss_match.group(1)) <= 100:
            loss = float(loss_match.group(1))
        else:
            raise SpecError(f"--link '{text}': '{part}' is not a delay, a jitter or a loss (out of place?)", LINK_HINT)
    delay, jitter = (times + [0, 0])[:2]
    if jitter and not delay:
        raise SpecError(f"--link '{text}': a jitter needs a delay", LINK_HINT)
    return LinkProfile(rate_bps, delay, jitter, loss)


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
    scheduler: str = "none"
    link: str | None = None  # how traffic between nodes is shaped (parse_link), normalised; None: unshaped
    # Extra packages for the nodes' Python, as lab/model/requirements.py normalises them; () for torch + numpy only.
    requirements: tuple[str, ...] = ()
    # The user's project folder, mounted read-only at the same path on every node and the working directory of
    # `lab exec`/`lab torchrun` there (absolute); None: none.
    workspace: str | None = None
    python: str | None = None  # `--image IMAGE`: the image's interpreter, when the lab is not to search for it
    # The process that made the lab and removes it when it ends, 'host:pid:start' (the pytest plugin's session,
    # lab/testing/owners.py), so a lab whose owner died can be told from one in use; None: made by hand (`lab up`).
    # Not part of what the lab is: left out of the fingerprint.
    owner: str | None = None

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
        if self.image not in IMAGE_CHOICES and not IMAGE_REFERENCE.match(self.image):
            raise SpecError(f"--image '{self.image}' is neither auto, host nor an image name",
                            "name a local image as docker does, e.g. --image my-team/train:2.13 (see `docker images`)")
        if self.python is not None and (self.image in IMAGE_CHOICES or not self.python.startswith("/")):
            raise SpecError(f"--python '{self.python}' needs --image IMAGE and an absolute path",
                            "e.g. --image my-team/train:2.13 --python /opt/conda/bin/python")
        if self.scheduler not in SCHEDULERS:
            raise SpecError(f"--scheduler '{self.scheduler}' is not one of {', '.join(SCHEDULERS)}", "try --scheduler slurm")
        if self.scheduler != "none" and self.image != "auto":
            raise SpecError(f"--scheduler {self.scheduler} needs the node image", f"leave out --image {self.image}")
        object.__setattr__(self, "gpus", parse_gpus(self.gpus))  # frozen: normalise in place
        object.__setattr__(self, "requirements", tuple(self.requirements))  # a list when read back from JSON
        if self.workspace is not None and not self.workspace.startswith("/"):
            raise SpecError(f"--workspace '{self.workspace}' is not an absolute path", "give the project's folder")
        if self.requirements and self.image == "host":
            raise SpecError("--pip/--requirements cannot add packages to --image host: its nodes run this host's Python",
                            "install them into this host's Python (the nodes see it), or leave out --image host")
        if self.link is not None:
            object.__setattr__(self, "link", parse_link(self.link).text())

    @property
    def user_image(self) -> bool:
        """Nodes from the user's own image (not the node image, not the host's Python)."""
        return self.image not in IMAGE_CHOICES

    @property
    def link_profile(self) -> LinkProfile | None:
        return parse_link(self.link) if self.link else None

    def node_list(self) -> list[Node]:
        return [Node(self.name, index) for index in range(self.nodes)]

    @property
    def master_addr(self) -> str:
        return "node0"

    def to_dict(self) -> dict:
        """Every field; `owner` only when there is one, so labs made by hand keep the labels they always had."""
        data = asdict(self)
        if data["owner"] is None:
            del data["owner"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "LabSpec":
        known = {key: data[key] for key in cls.__dataclass_fields__ if key in data}
        return cls(**known)

    def fingerprint(self) -> str:
        """Short hash of the spec; stored on every object so `lab up` can tell same from different."""
        text = json.dumps({key: value for key, value in self.to_dict().items() if key != "owner"}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def node_memory(self) -> int:
        """What one node is counted for: its --memory limit, or its job's processes (workers + torchrun's agent)."""
        return self.memory or PROCESS_MEMORY * ((self.nproc_per_node or DEFAULT_NPROC_PER_NODE) + 1)

    def check_fits(self, host_cpus: int, host_memory: int) -> None:
        """Refuse a lab the host cannot hold, before anything is created."""
        per_node = self.node_memory()
        if self.nodes * per_node > host_memory:
            fit = max(1, host_memory // per_node)
            raise SpecError(
                f"{self.nodes} nodes need {format_bytes(self.nodes * per_node)} but this host has "
                f"{format_bytes(host_memory)}",
                f"use --nodes {fit} or less, or a smaller --memory",
            )
        if self.cpus is not None and self.cpus > host_cpus:
            raise SpecError(f"--cpus {self.cpus} is more than this host's {host_cpus} cores", f"use --cpus {host_cpus} or less")
