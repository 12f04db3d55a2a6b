"""The lab as Docker will make it: every setting of its network, volume and node containers, decided up front.

`build_plan` is a pure function of a LabSpec and what was found on the host (`HostFacts`): no engine,
no files, no clock. `DockerDriver.apply` carries a plan out as it is, `lab up --dry-run` prints it, and
the driver reads the same records back from running containers for `lab status` and `lab export compose`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from lab.model.spec import EXERCISES_MOUNT, SHARED_MOUNT, LabSpec, Node
from lab.nodes import slurm
from lab.nodes.gpus import TOOLKIT_CAPABILITIES, TOOLKIT_RUNTIME, HostGpus, NodeGpuPlan, plan_gpus
from lab.nodes.labels import (
    GPUS_LABEL,
    NETWORK_OPTIONS,
    PYTHON_LABEL,
    ROLE_LABEL,
    SSH_PORT,
    container_name,
    lab_labels,
    network_name,
    node_labels,
    volume_name,
)

AUTHORIZED_KEYS_PATH = "/etc/ssh/lab_authorized_keys"
NODE_SSH_DIR = "/etc/lab/ssh"  # provision.yml's node_ssh_dir: the ssh client config it writes names these files
SHM_SIZE = 512 * 1024**2  # torch's DataLoader workers and gloo share memory through /dev/shm
# Least privilege: every capability dropped, only these given back, found by test (README "Security" says why each):
# sshd's privilege separation and logins, and root in a node writing to the shared folder the host's user owns.
NODE_CAPABILITIES = ("AUDIT_WRITE", "DAC_OVERRIDE", "SETGID", "SETUID", "SYS_CHROOT")
NET_ADMIN = "NET_ADMIN"  # only with `lab up --net-admin` (tc for `lab fault delay`)
SECURITY_OPTIONS = ("no-new-privileges",)  # no setuid binary or file capability raises a process's privileges
PIDS_LIMIT = 4096  # processes and threads per node: a fork bomb stops here, torch's threads fit well below


@dataclass(frozen=True)
class HostPython:
    """The interpreter `--image host` nodes run and the folders outside /usr it needs (prefixes, site-packages)."""

    executable: str
    folders: tuple[str, ...]

    @property
    def bin_dir(self) -> str:
        return os.path.dirname(self.executable)

    def environment(self) -> dict[str, str]:
        """This interpreter first on PATH for processes started with `docker exec`."""
        return {"PATH": f"{self.bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


@dataclass(frozen=True)
class HostFacts:
    """What was found on the host, so that planning itself looks at nothing."""

    gpus: HostGpus
    image: str  # the node image's tag (built or not)
    shared_dir: Path  # the lab's folder behind /lab/shared
    exercises_dir: Path
    public_key: Path  # the lab's SSH public key (it need not exist yet)
    python: HostPython | None = None  # `--image host`: the interpreter the nodes run
    host_folders: tuple[str, ...] = ()  # `--image host`: host folders the nodes mount read-only
    slurm_dir: Path | None = None  # `--scheduler slurm`: the lab's slurm.conf folder and munge key (lab/nodes/slurm.py)
    neighbour_limit: int | None = None  # the host's ARP table size (net.ipv4.neigh.default.gc_thresh3), when known
    image_python: str | None = None  # `--image IMAGE`: the image's interpreter with torch
    image_path: str | None = None  # `--image IMAGE`: PATH for the nodes' processes (that interpreter's folder first)


@dataclass(frozen=True)
class Mount:
    source: str  # a host path, or the volume's name
    target: str
    read_only: bool = True
    kind: str = "bind"  # "bind" or "volume"


@dataclass(frozen=True)
class Port:
    container_port: int
    host_ip: str = "127.0.0.1"
    host_port: int | None = None  # None: the engine picks a free one


@dataclass
class ContainerPlan:
    """Every setting one node container gets."""

    index: int
    name: str
    hostname: str
    image: str
    network: str
    aliases: list[str]
    labels: dict[str, str] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)  # host:container:permissions
    device_requests: list[dict] = field(default_factory=list)  # NVIDIA toolkit requests, as the engine API spells them
    ports: list[Port] = field(default_factory=list)
    cpus: float | None = None
    memory: int | None = None
    memory_swap: int | None = None
    shm_size: int | None = None
    init: bool = False
    cap_drop: list[str] = field(default_factory=list)
    cap_add: list[str] = field(default_factory=list)
    security_opt: list[str] = field(default_factory=list)
    pids_limit: int | None = None
    start_commands: list[list[str]] = field(default_factory=list)  # run as root in the started node, in order

    def to_dict(self) -> dict:
        return _plain(dataclasses.asdict(self))


@dataclass
class NetworkPlan:
    name: str
    driver: str
    options: dict[str, str]
    labels: dict[str, str]

    def to_dict(self) -> dict:
        return _plain(dataclasses.asdict(self))


@dataclass
class VolumePlan:
    """The shared volume: a named local volume bound to the lab's shared folder on the host."""

    name: str
    host_dir: str
    labels: dict[str, str]

    def to_dict(self) -> dict:
        return _plain(dataclasses.asdict(self))


@dataclass
class LabPlan:
    spec: LabSpec  # with --gpus auto resolved: what the lab records
    gpu_mode: str  # "toolkit", "passthrough" or "cpu"
    network: NetworkPlan
    volume: VolumePlan
    containers: list[ContainerPlan]
    notices: list[str] = field(default_factory=list)

    @property
    def lab(self) -> str:
        return self.spec.name

    def to_dict(self) -> dict:
        return _plain({"lab": self.lab, "spec": self.spec.to_dict(), "gpu_mode": self.gpu_mode,
                       "notices": self.notices, "network": self.network.to_dict(), "volume": self.volume.to_dict(),
                       "containers": [container.to_dict() for container in self.containers]})


def build_plan(spec: LabSpec, facts: HostFacts) -> LabPlan:
    """The network, volume and containers for `spec` on a host with `facts`; raises SpecError for what cannot be."""
    gpu_plan = plan_gpus(spec.gpus, spec.nodes, facts.gpus)
    spec = dataclasses.replace(spec, gpus=gpu_plan.resolved)  # the lab records what `auto` found
    network = NetworkPlan(network_name(spec.name), "bridge", dict(NETWORK_OPTIONS),
                          {**lab_labels(spec.name, spec.owner), ROLE_LABEL: "network"})
    volume = VolumePlan(volume_name(spec.name), str(facts.shared_dir), {**lab_labels(spec.name, spec.owner),
                                                                         ROLE_LABEL: "volume"})
    containers = [_container(spec, node, gpus, facts) for node, gpus in zip(spec.node_list(), gpu_plan.nodes)]
    return LabPlan(spec, gpu_plan.mode, network, volume, containers,
                   list(gpu_plan.notices) + neighbour_notices(spec.nodes, facts.neighbour_limit))


def neighbour_notices(nodes: int, limit: int | None) -> list[str]:
    """Every node's namespace shares the host's ARP table: a full mesh of N nodes needs N x (N - 1) entries.

    Measured: 64 nodes overflowed the default 1024 ("neighbor table overflow", gloo: "No route to host").
    """
    if limit is None or nodes * (nodes - 1) <= limit:
        return []
    return [f"{nodes} nodes talking to each other need {nodes * (nodes - 1)} ARP entries but this host keeps at most "
            f"{limit}: jobs across all nodes may fail with 'No route to host'; raise it with `sysctl -w "
            f"net.ipv4.neigh.default.gc_thresh3={2 * nodes * nodes} net.ipv4.neigh.default.gc_thresh2={nodes * nodes}`"]


def _container(spec: LabSpec, node: Node, gpus: NodeGpuPlan, facts: HostFacts) -> ContainerPlan:
    """One node: the shared folders and key, the host's Python for `--image host`, its GPUs, its limits."""
    mounts = [Mount(volume_name(spec.name), SHARED_MOUNT, read_only=False, kind="volume"),
              Mount(str(facts.exercises_dir), EXERCISES_MOUNT),
              Mount(str(facts.public_key), AUTHORIZED_KEYS_PATH),
              # the lab's key and pinned host keys, for ssh from node to node (DeepSpeed's and MPI's launchers)
              Mount(str(facts.public_key.parent), NODE_SSH_DIR)]
    if spec.workspace:
        mounts.append(Mount(spec.workspace, spec.workspace))  # the same path as here: paths in configs stay true
    environment = {"LAB_NODE_RANK": str(node.index)}
    labels = node_labels(spec, node)
    if spec.image == "host":
        mounts += [Mount(folder, folder) for folder in facts.host_folders]
        environment.update(facts.python.environment())
        labels[PYTHON_LABEL] = facts.python.executable
    elif facts.image_python:
        environment["PATH"] = facts.image_path
        labels[PYTHON_LABEL] = facts.image_python
    mounts += [Mount(source, bind["bind"], read_only=bind["mode"] == "ro") for source, bind in gpus.binds.items()]
    start_commands = [list(gpus.loader_command)] if gpus.loader_command else []
    if spec.scheduler == slurm.SCHEDULER:
        mounts += [Mount(str(facts.slurm_dir / "etc"), slurm.CONFIG_MOUNT),
                   Mount(str(facts.slurm_dir / "munge.key"), slurm.MUNGE_KEY_MOUNT)]
        start_commands.append(list(slurm.START_COMMAND))
    environment.update(gpus.environment)
    if gpus.label:
        labels[GPUS_LABEL] = gpus.label
    requests = [{"Driver": TOOLKIT_RUNTIME, "DeviceIDs": list(gpus.device_ids), "Capabilities": [list(TOOLKIT_CAPABILITIES)]}]
    return ContainerPlan(
        index=node.index,
        name=container_name(node),
        hostname=node.hostname,
        image=facts.image,
        network=network_name(spec.name),
        aliases=[node.hostname],
        labels=labels,
        environment=environment,
        mounts=sorted(mounts, key=lambda mount: (mount.target, mount.source)),
        devices=list(gpus.devices),
        device_requests=requests if gpus.device_ids else [],
        ports=[Port(SSH_PORT)],
        cpus=spec.cpus,
        memory=spec.memory,
        memory_swap=spec.memory,  # no swap beyond the limit: a node out of memory is OOM-killed, not thrashing
        shm_size=SHM_SIZE,
        init=True,
        cap_drop=["ALL"],
        cap_add=sorted([*NODE_CAPABILITIES, *([NET_ADMIN] if spec.net_admin else [])]),
        security_opt=list(SECURITY_OPTIONS),
        pids_limit=PIDS_LIMIT,
        start_commands=start_commands,
    )


def _plain(value):
    """JSON-ready and stable: dicts with sorted keys, lists for tuples, strings for paths."""
    if isinstance(value, dict):
        return {str(key): _plain(value[key]) for key in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value
