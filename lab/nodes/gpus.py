"""GPU planning: which of the host's NVIDIA GPUs each node gets, and how they reach the container.

Nothing here knows about Docker. `detect_host` reads what the host offers (the engine's runtimes are
passed in); `plan_gpus` turns a `--gpus` request into per-node plans: device ids for the NVIDIA
Container Toolkit, or raw device nodes plus read-only driver libraries when there is no toolkit, or
nothing (CPU) with a one-line notice. `run_backend` turns `--backend auto` into gloo or nccl from
the GPUs a lab's nodes actually have, so a run never hangs on a backend the lab cannot serve.

Test-only: LAB_HOST_ROOT makes `detect_host` read a fake host under that folder (its dev/nvidia*,
proc/driver/nvidia/gpus, nvidia-smi in its PATH folders, etc/ld.so.cache) and the plan give nodes those
files at their paths inside it; tests/integration/test_gpu_passthrough.py uses it to prove raw passthrough
on a machine without a GPU. Real hosts leave it unset (root "/").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import RunError, SpecError
from lab.model.spec import parse_gpus

TOOLKIT_RUNTIME = "nvidia"
TOOLKIT_CAPABILITIES = ("gpu", "compute", "utility")
# Device nodes every CUDA process needs besides its GPUs' own /dev/nvidiaN.
CONTROL_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
# The driver's user-space libraries for compute and nvidia-smi (what the toolkit mounts for compute,utility).
DRIVER_LIBRARY = re.compile(
    r"^lib(cuda|cudadebugger|nvidia-(ml|ptxjitcompiler|nvvm|gpucomp|allocator|cfg|opencl|fatbinaryloader|compiler))\.so"
)
DRIVER_TOOLS = ("nvidia-smi",)
PROC_GPUS = "/proc/driver/nvidia/gpus"
HOST_ROOT_VARIABLE = "LAB_HOST_ROOT"  # test-only, see the module docstring
SMI_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)")
CPU_NOTICE = "no NVIDIA GPU found (no nvidia runtime in Docker, no /dev/nvidia*): nodes run on CPU with gloo"


@dataclass(frozen=True)
class Gpu:
    """One GPU of the host: its index (nvidia-smi order), /dev/nvidia<minor>, UUID and model."""

    index: int
    minor: int
    uuid: str = ""
    name: str = ""

    @property
    def device_id(self) -> str:
        """What the toolkit is asked for: the UUID (stable), else the index."""
        return self.uuid or str(self.index)


@dataclass(frozen=True)
class HostGpus:
    """What this host offers for GPUs, gathered by `detect_host` or written by hand in tests."""

    runtimes: frozenset[str] = frozenset()
    device_nodes: frozenset[str] = frozenset()  # /dev/nvidia* that exist
    gpus: tuple[Gpu, ...] = ()
    libraries: tuple[str, ...] = ()  # driver libraries, at the paths the host's loader finds them
    tools: tuple[str, ...] = ()  # nvidia-smi and the like
    root: str = "/"  # where the paths above lie on this machine: "/" but under LAB_HOST_ROOT

    def host_path(self, path: str) -> str:
        """Where `path` (as the host sees it, and as a node gets it) lies on this machine."""
        return under_root(self.root, path)

    @property
    def has_toolkit(self) -> bool:
        return TOOLKIT_RUNTIME in self.runtimes

    def usable(self) -> tuple[Gpu, ...]:
        """GPUs a node can be given: all with the toolkit, those whose /dev/nvidiaN exists without it."""
        if self.has_toolkit:
            return self.gpus
        if "/dev/nvidiactl" not in self.device_nodes:
            return ()
        return tuple(gpu for gpu in self.gpus if f"/dev/nvidia{gpu.minor}" in self.device_nodes)


@dataclass
class NodeGpuPlan:
    """How one node gets its GPUs; empty for a CPU node."""

    gpus: tuple[Gpu, ...] = ()
    device_ids: list[str] = field(default_factory=list)  # for the toolkit's device request
    devices: list[str] = field(default_factory=list)  # host:container:permissions, raw passthrough
    binds: dict[str, dict] = field(default_factory=dict)  # read-only driver libraries and tools
    environment: dict[str, str] = field(default_factory=dict)
    loader_command: list[str] = field(default_factory=list)  # run in the started node so its loader finds the libraries

    @property
    def label(self) -> str:
        """The node's GPUs for `lab status`, as host indices: '0,1'."""
        return ",".join(str(gpu.index) for gpu in self.gpus)


@dataclass
class GpuPlan:
    mode: str  # "toolkit", "passthrough" or "cpu"
    resolved: str  # the request with auto resolved: what the lab's spec records
    nodes: list[NodeGpuPlan]
    notices: list[str] = field(default_factory=list)


def plan_gpus(request: str, nodes: int, host: HostGpus) -> GpuPlan:
    """Per-node GPU plans for `--gpus request` on `host`: partitioned when there are enough, shared when not."""
    request = parse_gpus(request)
    cpu = [NodeGpuPlan() for _ in range(nodes)]
    if request == "none":
        return GpuPlan("cpu", "none", cpu)
    gpus = host.usable()
    if not gpus:
        if request == "auto":
            return GpuPlan("cpu", "none", cpu, [CPU_NOTICE])
        raise SpecError(f"--gpus {request}: {CPU_NOTICE.split(':')[0]}",
                        "use --gpus auto or none; with GPUs, install the NVIDIA Container Toolkit or the driver")
    if request.isdigit() and int(request) > len(gpus):
        raise SpecError(f"--gpus {request} asks for {request} GPUs per node but this host has {len(gpus)}",
                        f"use --gpus {len(gpus)} or less, or --gpus all to split them across the nodes")
    assignment = _assign(gpus, nodes, int(request) if request.isdigit() else None)
    notices = _sharing_notices(assignment)
    mode = "toolkit" if host.has_toolkit else "passthrough"
    plans = [_node_plan(mode, node_gpus, host) for node_gpus in assignment]
    return GpuPlan(mode, "all" if request == "auto" else request, plans, notices)


def _assign(gpus: tuple[Gpu, ...], nodes: int, per_node: int | None) -> list[tuple[Gpu, ...]]:
    """per_node None: every GPU, split into near-equal contiguous shares (one each, round robin, when too few)."""
    if per_node is None:
        if len(gpus) < nodes:
            return [(gpus[index % len(gpus)],) for index in range(nodes)]
        share, extra = divmod(len(gpus), nodes)
        bounds = [index * share + min(index, extra) for index in range(nodes + 1)]
        return [gpus[bounds[index]:bounds[index + 1]] for index in range(nodes)]
    return [tuple(gpus[(index * per_node + k) % len(gpus)] for k in range(per_node)) for index in range(nodes)]


def _sharing_notices(assignment: list[tuple[Gpu, ...]]) -> list[str]:
    holders: dict[int, list[str]] = {}
    for node, node_gpus in enumerate(assignment):
        for gpu in node_gpus:
            holders.setdefault(gpu.index, []).append(f"node{node}")
    shared = [f"GPU {index} by {', '.join(names)}" for index, names in sorted(holders.items()) if len(names) > 1]
    if not shared:
        return []
    return [f"not enough GPUs to give every node its own, so they are shared ({'; '.join(shared)}); "
            "NCCL works across nodes sharing a GPU, but they compete for its memory and time"]


def _node_plan(mode: str, gpus: tuple[Gpu, ...], host: HostGpus) -> NodeGpuPlan:
    if mode == "toolkit":
        # The toolkit mounts the driver itself and renumbers the node's GPUs from 0.
        return NodeGpuPlan(gpus, device_ids=[gpu.device_id for gpu in gpus],
                           environment={"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"})
    paths = [f"/dev/nvidia{gpu.minor}" for gpu in gpus] + [path for path in CONTROL_DEVICES if path in host.device_nodes]
    devices = [f"{host.host_path(path)}:{path}:rwm" for path in paths]
    binds = {host.host_path(path): {"bind": path, "mode": "ro"} for path in (*host.libraries, *host.tools)}
    # Like the toolkit's ldconfig hook: the node's loader cache gets the libraries (their folders named, as
    # some are outside the node's ld.so.conf), so every process finds them, ssh sessions included. -X: the
    # binds are the soname paths already, so no links are made (some nodes mount the host's /usr read-only).
    folders = sorted({os.path.dirname(path) for path in host.libraries} - {""})
    loader_command = ["ldconfig", "-X", *folders] if host.libraries else []
    return NodeGpuPlan(gpus, devices=devices, binds=binds, loader_command=loader_command)


# --- detection ------------------------------------------------------------------------------------
def detect_host(runtimes: set[str]) -> HostGpus:
    """This host's GPUs, device nodes and driver libraries; `runtimes` are the engine's."""
    root = os.environ.get(HOST_ROOT_VARIABLE) or "/"
    device_nodes = frozenset(f"/dev/{path.name}" for path in Path(under_root(root, "/dev")).glob("nvidia*"))
    tools = find_tools(root)
    smi = next((under_root(root, tool) for tool in tools if os.path.basename(tool) == "nvidia-smi"), None)
    gpus = read_proc_gpus(Path(under_root(root, PROC_GPUS))) or parse_nvidia_smi(_command_output([smi, "-L"]) if smi else "")
    cache = ["-C", under_root(root, "/etc/ld.so.cache"), "-p"]
    libraries = parse_ldconfig(_command_output(["ldconfig", *cache]) or _command_output(["/sbin/ldconfig", *cache]))
    return HostGpus(frozenset(runtimes), device_nodes, tuple(gpus), tuple(libraries), tools, root)


def under_root(root: str, path: str) -> str:
    """`path` of a host whose filesystem starts at `root`, as this machine reaches it."""
    return os.path.join(root, path.lstrip("/"))


def find_tools(root: str) -> tuple[str, ...]:
    """DRIVER_TOOLS on the PATH of the host at `root`, as that host's paths."""
    folders = [folder for folder in os.environ.get("PATH", os.defpath).split(os.pathsep) if folder.startswith("/")]
    search = os.pathsep.join(under_root(root, folder) for folder in folders)
    found = (shutil.which(tool, path=search) for tool in DRIVER_TOOLS)
    return tuple("/" + os.path.relpath(path, root) for path in found if path)


def _command_output(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def read_proc_gpus(folder: Path) -> list[Gpu]:
    """GPUs from the driver's /proc/driver/nvidia/gpus/<bus id>/information, in bus order."""
    found = []
    for index, information in enumerate(sorted(folder.glob("*/information")) if folder.is_dir() else []):
        fields = {}
        for line in information.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        minor = fields.get("Device Minor", "")
        found.append(Gpu(index, int(minor) if minor.isdigit() else index, fields.get("GPU UUID", ""),
                         fields.get("Model", "")))
    return found


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """GPUs from `nvidia-smi -L` ('GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)'); minor taken as the index."""
    found = []
    for line in text.splitlines():
        match = SMI_LINE.match(line.strip())
        if match:
            index = int(match.group(1))
            found.append(Gpu(index, index, match.group(3), match.group(2)))
    return found


def parse_ldconfig(text: str) -> list[str]:
    """64-bit NVIDIA driver libraries from `ldconfig -p`, at the paths the loader resolves them to."""
    found = []
    for line in text.splitlines():
        name, _, rest = line.strip().partition(" (")
        flags, _, path = rest.partition(") => ")
        if DRIVER_LIBRARY.match(name) and "64" in flags and path and path not in found:
            found.append(path)
    return found


# --- backends -------------------------------------------------------------------------------------
def run_backend(requested: str, node_gpus: list[list[str]], nproc_per_node: int, lab_name: str) -> str:
    """gloo or nccl for a run: nccl needs every process of a node on its own GPU (LOCAL_RANK -> device).

    Nodes may share a GPU: NCCL tells ranks apart by host, and two containers on one GPU were measured
    to all_reduce fine; what NCCL refuses is two ranks of one node on the same device.
    """
    counts = [len(gpus) for gpus in node_gpus]
    nccl_ok = bool(counts) and min(counts) >= nproc_per_node
    if requested == "auto":
        return "nccl" if nccl_ok else "gloo"
    if requested == "nccl" and not nccl_ok:
        if not any(counts):
            why = f"lab '{lab_name}' has no GPUs"
        else:
            why = (f"lab '{lab_name}' has {', '.join(f'node{i}: {c}' for i, c in enumerate(counts))} GPU(s) "
                   f"for {nproc_per_node} process(es) per node")
        raise RunError(f"--backend nccl needs one GPU per process of a node, but {why}",
                       "use --backend gloo (or auto), fewer processes (--nproc-per-node 1), or `lab up --gpus all --recreate`")
    return requested
