"""The Docker driver: the only code that talks to the engine about labs.

`apply` makes a LabPlan's network, volume and containers exactly as planned (`create_arguments` is the
translation, a pure function); everything else reads state back (`describe`, `node_states`) or acts on
one node (faults, processes). Every object carries the lab's labels, so `containers`/`remove_lab` work
from labels alone and clean up after a crash without any state file.
"""

from __future__ import annotations

import contextlib
import json
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import docker
import docker.errors
import requests.exceptions

from lab.errors import EngineError, LabStateError, ProvisionError
from lab.lines import STDERR, STDOUT, LineAssembler
from lab.model.spec import LabSpec, Node
from lab.nodes.labels import (
    GPUS_LABEL,
    LAB_LABEL,
    NODE_LABEL,
    OWNER_LABEL,
    PYTHON_LABEL,
    SPEC_LABEL,
    SSH_PORT,
    container_name,
    lab_filter,
    network_name,
    volume_name,
)
from lab.nodes.plan import ContainerPlan, LabPlan, Mount, Port

ENGINE_HINT = "start one with `make engine` (or start Docker Desktop), then try again"
# The engine creates, starts and removes containers faster several at a time: starting 32 nodes took 11.2 s one
# at a time and 5.0 s 16 at a time (bench/RESULTS.md). The client keeps as many connections open, so no thread
# waits for one or throws one away.
ENGINE_THREADS = 16
HOST_KEY_WAIT_S = 30  # a node whose image makes its host key at first start (user and host images) has it by then
LISTING_ATTEMPTS = 3  # a container removed while the engine lists them (another command's `down`): list again
HOST_KEY_PATH = "/etc/ssh/ssh_host_ed25519_key.pub"  # sshd's ed25519 key: in the node image and `--image host` nodes
PAUSE_TRIES = 4  # the freezer's "unable to freeze" (processes caught forking) is tried again: pause_node
Item = TypeVar("Item")
Result = TypeVar("Result")


@contextlib.contextmanager
def engine_errors(action: str):
    """Turn the SDK's exceptions into one-line EngineErrors."""
    try:
        yield
    except (requests.exceptions.ConnectionError, docker.errors.DockerException) as error:
        if isinstance(error, docker.errors.APIError):
            explanation = error.explanation or str(error)
            raise EngineError(f"Docker refused to {action}: {explanation}".splitlines()[0]) from None
        raise EngineError(f"lost the Docker engine while trying to {action}", ENGINE_HINT) from None


def in_parallel(action: Callable[[Item], Result], items: list[Item]) -> list[Result]:
    """action(item) for every item, ENGINE_THREADS at a time; the results in item order.

    At the first failure the calls not started yet are dropped; once the running ones have ended, the failure of
    the earliest item is raised as it is (an EngineError stays one line).
    """
    pool = ThreadPoolExecutor(max_workers=max(1, min(ENGINE_THREADS, len(items))))
    futures = []
    try:
        futures = [pool.submit(action, item) for item in items]
        wait(futures, return_when=FIRST_EXCEPTION)
    finally:  # Ctrl-C included: nothing new starts, and nothing still runs once this returns
        pool.shutdown(wait=True, cancel_futures=True)
    failure = next((future.exception() for future in futures if not future.cancelled() and future.exception()), None)
    if failure is not None:
        raise failure
    return [future.result() for future in futures]


def connect() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=120, max_pool_size=ENGINE_THREADS)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        raise EngineError("no Docker engine answers", ENGINE_HINT) from None
    return client


@dataclass
class NodeState:
    """What `lab status` shows for one node; built from the container alone."""

    index: int
    hostname: str
    container: str
    state: str
    ip: str | None
    ssh_port: int | None
    cpus: float | None
    memory: int | None
    gpus: list[str] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return self.__dict__.copy()


@dataclass
class ContainerDescription:
    """A node container as the engine reports it: its settings, as a plan would give them, and its state."""

    settings: ContainerPlan
    state: NodeState


def describe_container(attrs: dict) -> ContainerDescription:
    """Read one node container's inspect data: image, mounts, devices, limits, caps, env, labels, ip, ports."""
    config, host = attrs["Config"], attrs["HostConfig"]
    labels = config.get("Labels") or {}
    network = network_name(labels.get(LAB_LABEL, ""))
    endpoint = (attrs["NetworkSettings"].get("Networks") or {}).get(network) or {}
    hostname = config["Hostname"]
    mounts = [Mount(mount.get("Name") if mount["Type"] == "volume" else mount["Source"], mount["Destination"],
                    read_only=not mount.get("RW", True), kind=mount["Type"]) for mount in attrs.get("Mounts") or []]
    ports = [Port(int(key.split("/")[0]), binding.get("HostIp") or "", int(binding["HostPort"]) if binding.get("HostPort") else None)
             for key, bindings in sorted((host.get("PortBindings") or {}).items()) for binding in bindings or []]
    requests = [{"Driver": request.get("Driver", ""), "DeviceIDs": request.get("DeviceIDs") or [],
                 "Capabilities": request.get("Capabilities") or []} for request in host.get("DeviceRequests") or []]
    # The engine adds the container's short id to its aliases; a partitioned node keeps its planned alias.
    aliases = [alias for alias in endpoint.get("Aliases") or [] if not attrs["Id"].startswith(alias)] or [hostname]
    settings = ContainerPlan(
        index=int(labels[NODE_LABEL]),
        name=attrs["Name"].lstrip("/"),
        hostname=hostname,
        image=config["Image"],
        network=network,
        aliases=aliases,
        labels=dict(labels),
        environment=dict(entry.split("=", 1) for entry in config.get("Env") or [] if "=" in entry),
        mounts=sorted(mounts, key=lambda mount: (mount.target, mount.source)),
        devices=[f"{d['PathOnHost']}:{d['PathInContainer']}:{d['CgroupPermissions']}" for d in host.get("Devices") or []],
        device_requests=requests,
        ports=ports,
        cpus=host.get("NanoCpus", 0) / 1e9 or None,
        memory=host.get("Memory") or None,
        memory_swap=host.get("MemorySwap") or None,
        shm_size=host.get("ShmSize") or None,
        init=bool(host.get("Init")),
        cap_drop=list(host.get("CapDrop") or []),
        cap_add=list(host.get("CapAdd") or []),
        security_opt=list(host.get("SecurityOpt") or []),
        pids_limit=host.get("PidsLimit") or None,
    )
    published = (attrs["NetworkSettings"].get("Ports") or {}).get(f"{SSH_PORT}/tcp") or []
    state = attrs["State"]
    node_state = NodeState(
        index=settings.index,
        hostname=hostname,
        container=settings.name,
        # Docker keeps OOMKilled after the node is started again: only a node that is down was stopped by it.
        state=state["Status"] + (" (OOM-killed)" if state.get("OOMKilled") and state["Status"] != "running" else ""),
        ip=endpoint.get("IPAddress") or None,
        ssh_port=int(published[0]["HostPort"]) if published else None,
        cpus=settings.cpus,
        memory=settings.memory,
        gpus=[gpu for gpu in labels.get(GPUS_LABEL, "").split(",") if gpu],
        faults=_derived_faults(state, bool(endpoint)),
    )
    return ContainerDescription(settings, node_state)


def create_arguments(plan: ContainerPlan) -> dict:
    """The engine API arguments for one planned container: create_container's, create_host_config's, the endpoint's."""
    return {
        "container": {"image": plan.image, "name": plan.name, "hostname": plan.hostname, "labels": plan.labels,
                      "environment": plan.environment, "ports": [port.container_port for port in plan.ports]},
        "host_config": {
            "binds": [f"{m.source}:{m.target}:{'ro' if m.read_only else 'rw'}" for m in plan.mounts],
            "port_bindings": {port.container_port: (port.host_ip, port.host_port) if port.host_port else (port.host_ip,)
                              for port in plan.ports},
            "init": plan.init,
            "shm_size": plan.shm_size,
            "nano_cpus": int(plan.cpus * 1e9) if plan.cpus else None,
            "mem_limit": plan.memory,
            "memswap_limit": plan.memory_swap,
            "devices": plan.devices or None,
            "device_requests": plan.device_requests or None,
            "cap_drop": plan.cap_drop or None,
            "cap_add": plan.cap_add or None,
            "security_opt": plan.security_opt or None,
            "pids_limit": plan.pids_limit,
        },
        "network": plan.network,
        "endpoint": {"aliases": plan.aliases},
    }


class ExecProcess:
    """A process started with `docker exec`, its output streamed line by line."""

    def __init__(self, api, container: str, argv: list[str], env: dict[str, str], cwd: str):
        self.api = api
        self.exec_id = api.exec_create(container, argv, environment=env, workdir=cwd)["Id"]
        self.stream = api.exec_start(self.exec_id, stream=True, demux=True)

    def lines(self) -> Iterator[str]:
        """Whole lines of stdout and stderr, each stream read apart (a line cut on one is never glued to the other)."""
        assembler = LineAssembler()
        try:
            for out, err in self.stream:
                if out:
                    yield from assembler.feed(STDOUT, out)
                if err:
                    yield from assembler.feed(STDERR, err)
        except Exception:  # the engine went away or the container died mid-stream; wait() reports it
            pass
        yield from assembler.close()

    def wait(self) -> int | None:
        try:
            return self.api.exec_inspect(self.exec_id).get("ExitCode")
        except Exception:
            return None


def cgroup_oom_kills(pid: int, container_id: str, proc: Path = Path("/proc"),
                     cgroups: Path = Path("/sys/fs/cgroup")) -> int | None:
    """OOM kills in the memory cgroup of process `pid` (cgroup v2 memory.events, v1 memory.oom_control), read on
    this machine; None unless `pid` is visibly a process of container `container_id` and the file can be read."""
    try:
        memberships = (proc / str(pid) / "cgroup").read_text().splitlines() if pid > 0 else []
    except OSError:
        return None
    for line in memberships:
        _, controllers, path = line.split(":", 2)
        if not container_id or container_id not in path:
            continue  # another process than the container's (an engine in a VM numbers its own PIDs)
        if controllers == "":
            candidate = cgroups / path.lstrip("/") / "memory.events"
        elif "memory" in controllers.split(","):
            candidate = cgroups / "memory" / path.lstrip("/") / "memory.oom_control"
        else:
            continue
        try:
            text = candidate.read_text()
        except OSError:
            continue
        for entry in text.splitlines():
            key, _, value = entry.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def _is_process_of(pid: int, container_id: str, proc: Path = Path("/proc")) -> bool:
    """Whether `pid`, as this machine numbers processes, is in container `container_id` (by its cgroups)."""
    try:
        return bool(container_id) and pid > 0 and container_id in (proc / str(pid) / "cgroup").read_text()
    except OSError:
        return False


def listening_ports(pid: int, proc: Path = Path("/proc")) -> set[int] | None:
    """Ports in LISTEN state (0A) in the network namespace of `pid`, from /proc/PID/net/tcp and tcp6."""
    ports: set[int] = set()
    try:
        for table in ("tcp", "tcp6"):
            path = proc / str(pid) / "net" / table
            if not path.exists():
                continue
            for row in path.read_text().splitlines()[1:]:
                fields = row.split()
                if len(fields) > 3 and fields[3] == "0A":
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    except (OSError, ValueError):
        return None
    return ports


class DockerDriver:
    def __init__(self, client: docker.DockerClient | None = None):
        self.client = client or connect()

    # --- host -------------------------------------------------------------------------------
    def host_resources(self) -> tuple[int, int]:
        with engine_errors("describe the host"):
            info = self.client.info()
        return int(info["NCPU"]), int(info["MemTotal"])

    def runtimes(self) -> set[str]:
        with engine_errors("describe the host"):
            return set(self.client.info().get("Runtimes", {}))

    def has_image(self, tag: str) -> bool:
        with engine_errors(f"look up {tag}"):
            try:
                self.client.images.get(tag)
            except docker.errors.ImageNotFound:
                return False
        return True

    def engine_answers(self) -> bool:
        try:
            return bool(self.client.ping())
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return False

    # --- discovery ----------------------------------------------------------------------------
    def containers(self, name: str | None = None) -> list:
        with engine_errors("list containers"):
            found = self._listed_containers(lab_filter(name))
        return sorted(found, key=lambda c: (c.labels.get(LAB_LABEL, ""), int(c.labels.get(NODE_LABEL, 0))))

    def _listed_containers(self, filters: dict) -> list:
        """Containers with their full attributes; one removed by another command between the listing and its
        inspection (the SDK inspects each) makes the listing start again rather than fail."""
        for attempt in range(LISTING_ATTEMPTS):
            try:
                return self.client.containers.list(all=True, filters=filters)
            except docker.errors.NotFound:
                if attempt == LISTING_ATTEMPTS - 1:
                    raise
        return []

    def _labelled_labels(self) -> list[dict]:
        """The labels of every container, network and volume of any lab (containers from a sparse listing: one that
        another command removes meanwhile is no error)."""
        with engine_errors("list labs"):
            return [_labels(obj) for kind in (self.client.containers.list(all=True, sparse=True, filters=lab_filter()),
                                              self.client.networks.list(filters=lab_filter()),
                                              self.client.volumes.list(filters=lab_filter())) for obj in kind]

    def lab_names(self) -> list[str]:
        return sorted({labels[LAB_LABEL] for labels in self._labelled_labels() if labels.get(LAB_LABEL)})

    def lab_owners(self) -> dict[str, str]:
        """Lab name -> its owner (OWNER_LABEL), for every lab with an owner, from any object left of it."""
        return {labels[LAB_LABEL]: labels[OWNER_LABEL] for labels in self._labelled_labels()
                if labels.get(LAB_LABEL) and labels.get(OWNER_LABEL)}

    def existing_spec(self, name: str) -> LabSpec | None:
        """The spec every node of lab `name` carries: one listing, no inspect per node (`lab up` again is this)."""
        with engine_errors("list containers"):
            found = self.client.api.containers(all=True, filters=lab_filter(name))
        if not found:
            return None
        return LabSpec.from_dict(json.loads(found[0]["Labels"][SPEC_LABEL]))

    def node_image_ids(self, name: str) -> set[str]:
        """The images (by id) the node containers of lab `name` were made from (one listing)."""
        with engine_errors("list containers"):
            return {found["ImageID"] for found in self.client.api.containers(all=True, filters=lab_filter(name))}

    def image_id(self, tag: str) -> str | None:
        with engine_errors("look at an image"):
            try:
                return self.client.api.inspect_image(tag)["Id"]
            except docker.errors.ImageNotFound:
                return None

    def node_python(self, name: str) -> str | None:
        """The interpreter the lab's nodes run when it is not the node image's venv (`--image host`)."""
        return next((c.labels[PYTHON_LABEL] for c in self.containers(name) if PYTHON_LABEL in c.labels), None)

    def container_states(self, name: str) -> dict[int, str]:
        """Each node container of lab `name` by index: created, running, exited, removing, dead... (one listing)."""
        with engine_errors("list the lab's containers"):
            return {int(found["Labels"][NODE_LABEL]): found["State"]
                    for found in self.client.api.containers(all=True, filters=lab_filter(name))}

    def describe(self, name: str) -> list[ContainerDescription]:
        return [describe_container(container.attrs) for container in self.containers(name)]

    def node_states(self, name: str) -> list[NodeState]:
        return [description.state for description in self.describe(name)]

    def shared_dir(self, name: str) -> str | None:
        """The host folder behind lab `name`'s shared volume."""
        with engine_errors("inspect the shared volume"):
            try:
                return self.client.volumes.get(volume_name(name)).attrs.get("Options", {}).get("device")
            except docker.errors.NotFound:
                return None

    # --- create -------------------------------------------------------------------------------
    def apply(self, plan: LabPlan) -> None:
        """Make what the plan names and does not exist yet, start every node, run their start-up commands."""
        with engine_errors("create the lab network"):
            if not self.client.networks.list(names=[plan.network.name], filters=lab_filter(plan.lab)):
                self.client.networks.create(plan.network.name, driver=plan.network.driver, options=plan.network.options,
                                            labels=plan.network.labels)
        Path(plan.volume.host_dir).mkdir(parents=True, exist_ok=True)
        with engine_errors("create the shared volume"):
            if not self.client.volumes.list(filters={"name": plan.volume.name, **lab_filter(plan.lab)}):
                self.client.volumes.create(plan.volume.name, driver="local", labels=plan.volume.labels,
                                           driver_opts={"type": "none", "o": "bind", "device": plan.volume.host_dir})
        existing = self.container_states(plan.lab)
        in_parallel(lambda container: self._bring_up(plan.lab, container, existing.get(container.index)),
                    plan.containers)

    def _bring_up(self, lab: str, plan: ContainerPlan, state: str | None) -> None:
        """Create the node unless it exists (`state` None), start it unless it runs, run its start-up commands."""
        if state is None:
            self._create(plan)
        if state != "running":
            with engine_errors(f"start {plan.name}"):
                self.client.api.start(plan.name)
        for command in plan.start_commands:
            code, output = self.exec_output(lab, plan.index, command, user="root")
            if code != 0:
                raise ProvisionError(f"node{plan.index}: `{' '.join(command)}` failed (exit {code}): "
                                     f"{output.strip()[-300:]}",
                                     f"see `docker logs {plan.name}`; the start commands of every node are in "
                                     "`lab up --dry-run --json`")

    def _create(self, plan: ContainerPlan) -> None:
        api = self.client.api
        arguments = create_arguments(plan)
        with engine_errors(f"create {plan.name}"):
            api.create_container(
                **arguments["container"],
                host_config=api.create_host_config(**arguments["host_config"]),
                networking_config=api.create_networking_config(
                    {arguments["network"]: api.create_endpoint_config(**arguments["endpoint"])}),
            )

    # --- remove -------------------------------------------------------------------------------
    def remove_lab(self, name: str | None) -> dict[str, int]:
        """Remove every container, network and volume labelled for lab `name` (or all labs)."""
        api = self.client.api
        with engine_errors("list the lab's containers"):
            found = api.containers(all=True, filters=lab_filter(name))

        def remove_container(container: dict) -> int:
            with engine_errors(f"remove {container['Names'][0].lstrip('/')}"):
                try:
                    api.remove_container(container["Id"], force=True, v=True)
                except docker.errors.NotFound:
                    return 0
            return 1

        removed = {"containers": sum(in_parallel(remove_container, found)), "networks": 0, "volumes": 0}
        with engine_errors("remove the lab"):
            for network in self.client.networks.list(filters=lab_filter(name)):
                with contextlib.suppress(docker.errors.NotFound):
                    network.remove()
                    removed["networks"] += 1
            for volume in self.client.volumes.list(filters=lab_filter(name)):
                with contextlib.suppress(docker.errors.NotFound):
                    volume.remove(force=True)
                    removed["volumes"] += 1
        return removed

    # --- per-node control ---------------------------------------------------------------------
    def container(self, name: str, index: int):
        for container in self.containers(name):
            if int(container.labels[NODE_LABEL]) == index:
                return container
        raise LabStateError(f"lab '{name}' has no node{index}", "see `lab status` for its nodes")

    def node_status(self, name: str, index: int) -> str:
        """running, paused, exited, ... as the engine says now."""
        return self.container(name, index).status

    def kill_node(self, name: str, index: int) -> None:
        with engine_errors(f"kill node{index}"):
            self.container(name, index).kill()

    def stop_node(self, name: str, index: int, timeout: int = 5) -> None:
        with engine_errors(f"stop node{index}"):
            self.container(name, index).stop(timeout=timeout)

    def start_node(self, name: str, index: int) -> None:
        with engine_errors(f"start node{index}"):
            self.container(name, index).start()

    def pause_node(self, name: str, index: int) -> None:
        """Freeze the node's processes. The kernel's freezer can fail to freeze processes caught forking ("unable to
        freeze": runc gives up and thaws them, measured under the suite's load): tried again after a moment."""
        container = self.container(name, index)
        with engine_errors(f"pause node{index}"):
            for attempt in range(PAUSE_TRIES):
                try:
                    container.pause()
                    return
                except docker.errors.APIError as error:
                    if "unable to freeze" not in str(error.explanation or error) or attempt == PAUSE_TRIES - 1:
                        raise
                    time.sleep(0.5)

    def unpause_node(self, name: str, index: int) -> None:
        with engine_errors(f"unpause node{index}"):
            self.container(name, index).unpause()

    def disconnect_node(self, name: str, index: int) -> None:
        """Take the node off the lab network (a partition); nothing to do when it is already off."""
        container = self.container(name, index)
        with engine_errors(f"disconnect node{index}"):
            with contextlib.suppress(docker.errors.APIError):  # already disconnected
                self.client.networks.get(network_name(name)).disconnect(container)

    def reconnect_node(self, name: str, index: int) -> None:
        """Put the node back on the lab network under its hostname, unless it is on it."""
        container = self.container(name, index)
        network = network_name(name)
        if network in (container.attrs["NetworkSettings"].get("Networks") or {}):
            return
        with engine_errors(f"reconnect node{index}"):
            self.client.networks.get(network).connect(container, aliases=[Node(name, index).hostname])

    # --- processes in a node ------------------------------------------------------------------
    def start_process(self, name: str, index: int, argv: list[str], env: dict[str, str], cwd: str) -> ExecProcess:
        """Start argv in node `index`; read its output with lines(), its exit code with wait()."""
        with engine_errors(f"start a process on node{index}"):
            return ExecProcess(self.client.api, container_name(Node(name, index)), argv, env, cwd)

    def _main_process(self, name: str, index: int) -> tuple[int, str]:
        """(the node's main process as this machine numbers it, the container's id): one inspect."""
        with engine_errors(f"inspect node{index}"):
            state = self.client.api.inspect_container(container_name(Node(name, index)))
        return int(state.get("State", {}).get("Pid") or 0), str(state.get("Id", ""))

    def oom_kills_seen_from_host(self, name: str, index: int) -> int | None:
        """The node's OOM kill count read from its memory cgroup's file on this machine: no exec in the node (one
        inspect instead). None where that cannot be done here (an engine in a VM or elsewhere, another layout)."""
        return cgroup_oom_kills(*self._main_process(name, index))

    def listening_ports_seen_from_host(self, name: str, index: int) -> set[int] | None:
        """The TCP ports something listens on in the node, read from its network namespace's /proc tables on this
        machine (no exec); None where that cannot be done here."""
        pid, container_id = self._main_process(name, index)
        return listening_ports(pid) if _is_process_of(pid, container_id) else None

    def exec_output(self, name: str, index: int, argv: list[str], user: str = "") -> tuple[int | None, str]:
        """Run argv in node `index` to the end: (exit code, stdout and stderr together)."""
        api = self.client.api
        with engine_errors(f"run {argv[0]} on node{index}"):
            exec_id = api.exec_create(container_name(Node(name, index)), argv, user=user)["Id"]
            output = api.exec_start(exec_id)
            return api.exec_inspect(exec_id).get("ExitCode"), output.decode(errors="replace")

    def host_public_key(self, name: str, index: int) -> str:
        """Node `index`'s SSH host key ('ssh-ed25519 AAAA...'), read through the engine: a channel ssh cannot spoof."""
        deadline = time.monotonic() + HOST_KEY_WAIT_S
        code, output = self.exec_output(name, index, ["cat", HOST_KEY_PATH])
        while (code != 0 or not output.startswith("ssh-ed25519 ")) and time.monotonic() < deadline:
            time.sleep(0.2)  # a user image's node makes its key as it first starts: on a loaded machine, later
            code, output = self.exec_output(name, index, ["cat", HOST_KEY_PATH])
        if code != 0 or not output.startswith("ssh-ed25519 "):
            raise ProvisionError(f"node{index} has no SSH host key at {HOST_KEY_PATH}: {output.strip()[:200]}",
                                 "the node image makes one when the node first starts (ssh-keygen -t ed25519); `lab up --rebuild --recreate`")
        return output.strip()

    def memory_stats(self, name: str, index: int) -> dict:
        """The engine's memory statistics of node `index`'s cgroup (`docker stats`)."""
        with engine_errors(f"read node{index}'s memory"):
            return self.client.api.stats(container_name(Node(name, index)), stream=False, one_shot=True)["memory_stats"]


def _derived_faults(state: dict, on_lab_network: bool) -> list[str]:
    """Faults visible from the container itself; netem delays are added by lab.faults."""
    faults = []
    if state.get("Paused"):
        faults.append("paused")
    if state["Status"] == "exited":
        faults.append("killed" if state.get("ExitCode") in (137, -1) else "stopped")
    if state["Status"] == "running" and not on_lab_network:
        faults.append("partitioned")
    return faults


def _labels(obj) -> dict:
    attrs = obj.attrs
    return attrs.get("Labels") or (attrs.get("Config") or {}).get("Labels") or {}
