"""The Docker driver: turns a LabSpec into a network, a volume and one container per node.

Every object carries the lab's labels, so `find`/`remove` work from labels alone and
clean up after a crash without any state file.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

from lab.errors import EngineError, LabStateError
from lab.model.spec import (
    EXERCISES_MOUNT,
    LABEL_PREFIX,
    PYTHON_LABEL,
    SHARED_MOUNT,
    LabSpec,
    Node,
    lab_filter,
    lab_labels,
    network_name,
    node_labels,
    volume_name,
)

SSH_PORT = 22
AUTHORIZED_KEYS_PATH = "/etc/ssh/lab_authorized_keys"
# Nodes share one host, so their network can carry loopback-sized frames: with the default 1500-byte MTU,
# gloo's all_reduce over the bridge reached ~0.7 of native loopback bandwidth (bench/RESULTS.md).
NETWORK_OPTIONS = {"com.docker.network.driver.mtu": "65520"}
ENGINE_HINT = "start one with `make engine` (or start Docker Desktop), then try again"


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


def connect() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=120)
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
class MountPlan:
    """Host-side folders and extra container settings a node needs (GPU devices, host env mounts)."""

    shared_dir: Path
    exercises_dir: Path
    public_key: Path
    extra_binds: dict[str, dict] = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)
    device_requests: list = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    cap_add: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # extra container labels, e.g. the node's python


def node_python(containers) -> str | None:
    """The interpreter a lab's node containers run when it is not the node image's venv (`--image host`)."""
    return next((c.labels[PYTHON_LABEL] for c in containers if PYTHON_LABEL in c.labels), None)


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

    # --- discovery ----------------------------------------------------------------------------
    def containers(self, name: str | None = None) -> list:
        with engine_errors("list containers"):
            found = self.client.containers.list(all=True, filters=lab_filter(name))
        return sorted(found, key=lambda c: (c.labels.get(f"{LABEL_PREFIX}.lab", ""), int(c.labels.get(f"{LABEL_PREFIX}.node", 0))))

    def lab_names(self) -> list[str]:
        names = set()
        with engine_errors("list labs"):
            for kind in (self.client.containers.list(all=True, filters=lab_filter()),
                         self.client.networks.list(filters=lab_filter()),
                         self.client.volumes.list(filters=lab_filter())):
                names.update(_labels(obj).get(f"{LABEL_PREFIX}.lab") for obj in kind)
        return sorted(name for name in names if name)

    def existing_spec(self, name: str) -> LabSpec | None:
        containers = self.containers(name)
        if not containers:
            return None
        return LabSpec.from_dict(json.loads(containers[0].labels[f"{LABEL_PREFIX}.spec"]))

    def node_states(self, name: str) -> list[NodeState]:
        return [self._state(container) for container in self.containers(name)]

    def _state(self, container) -> NodeState:
        attrs = container.attrs
        labels = container.labels
        networks = attrs["NetworkSettings"].get("Networks") or {}
        lab_net = networks.get(network_name(labels[f"{LABEL_PREFIX}.lab"])) or {}
        ports = (attrs["NetworkSettings"].get("Ports") or {}).get(f"{SSH_PORT}/tcp") or []
        host_config = attrs["HostConfig"]
        return NodeState(
            index=int(labels[f"{LABEL_PREFIX}.node"]),
            hostname=attrs["Config"]["Hostname"],
            container=container.name,
            state=attrs["State"]["Status"] + (" (OOM-killed)" if attrs["State"].get("OOMKilled") else ""),
            ip=lab_net.get("IPAddress") or None,
            ssh_port=int(ports[0]["HostPort"]) if ports else None,
            cpus=host_config.get("NanoCpus", 0) / 1e9 or None,
            memory=host_config.get("Memory") or None,
            gpus=[gpu for gpu in labels.get(f"{LABEL_PREFIX}.gpus", "").split(",") if gpu],
            faults=_derived_faults(attrs, bool(lab_net)),
        )

    # --- create -------------------------------------------------------------------------------
    def create_lab(self, spec: LabSpec, image: str, plans: dict[int, MountPlan], gpu_labels: dict[int, str]) -> None:
        """Create the network, the shared volume and every node container, then start them."""
        api = self.client.api
        labels = lab_labels(spec.name)
        net = network_name(spec.name)
        with engine_errors("create the lab network"):
            if not self.client.networks.list(names=[net], filters=lab_filter(spec.name)):
                self.client.networks.create(net, driver="bridge", options=NETWORK_OPTIONS,
                                            labels={**labels, f"{LABEL_PREFIX}.role": "network"})
        shared_dir = plans[0].shared_dir
        shared_dir.mkdir(parents=True, exist_ok=True)
        with engine_errors("create the shared volume"):
            if not self.client.volumes.list(filters={"name": volume_name(spec.name), **lab_filter(spec.name)}):
                self.client.volumes.create(
                    volume_name(spec.name), driver="local",
                    driver_opts={"type": "none", "o": "bind", "device": str(shared_dir)},
                    labels={**labels, f"{LABEL_PREFIX}.role": "volume"},
                )
        existing = {int(c.labels[f"{LABEL_PREFIX}.node"]): c for c in self.containers(spec.name)}
        for node in spec.node_list():
            if node.index not in existing:
                self._create_node(api, spec, node, image, plans[node.index], gpu_labels.get(node.index, ""))
        for container in self.containers(spec.name):
            if container.status != "running":
                with engine_errors(f"start {container.name}"):
                    container.start()

    def _create_node(self, api, spec: LabSpec, node: Node, image: str, plan: MountPlan, gpus: str) -> None:
        binds = {
            volume_name(spec.name): {"bind": SHARED_MOUNT, "mode": "rw"},
            str(plan.exercises_dir): {"bind": EXERCISES_MOUNT, "mode": "ro"},
            str(plan.public_key): {"bind": AUTHORIZED_KEYS_PATH, "mode": "ro"},
            **plan.extra_binds,
        }
        host_config = api.create_host_config(
            binds=binds,
            port_bindings={SSH_PORT: ("127.0.0.1",)},
            init=True,
            shm_size="512m",
            nano_cpus=int(spec.cpus * 1e9) if spec.cpus else None,
            mem_limit=spec.memory,
            memswap_limit=spec.memory,  # no swap beyond the limit: a node out of memory is OOM-killed, not thrashing
            devices=plan.devices or None,
            device_requests=plan.device_requests or None,
            cap_add=plan.cap_add or None,
        )
        net = network_name(spec.name)
        networking = api.create_networking_config({net: api.create_endpoint_config(aliases=[node.hostname])})
        labels = {**node_labels(spec, node), **plan.labels}
        if gpus:
            labels[f"{LABEL_PREFIX}.gpus"] = gpus
        with engine_errors(f"create {node.resource_name}"):
            api.create_container(
                image,
                name=node.resource_name,
                hostname=node.hostname,
                labels=labels,
                ports=[SSH_PORT],
                environment={"LAB_NODE_RANK": str(node.index), **plan.environment},
                host_config=host_config,
                networking_config=networking,
            )

    # --- remove -------------------------------------------------------------------------------
    def remove_lab(self, name: str | None) -> dict[str, int]:
        """Remove every container, network and volume labelled for lab `name` (or all labs)."""
        removed = {"containers": 0, "networks": 0, "volumes": 0}
        with engine_errors("remove the lab"):
            for container in self.client.containers.list(all=True, filters=lab_filter(name)):
                with contextlib.suppress(docker.errors.NotFound):
                    container.remove(force=True, v=True)
                    removed["containers"] += 1
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
            if int(container.labels[f"{LABEL_PREFIX}.node"]) == index:
                return container
        raise LabStateError(f"lab '{name}' has no node{index}", "see `lab status` for its nodes")


def _derived_faults(attrs: dict, on_lab_network: bool) -> list[str]:
    """Faults visible from the container itself; netem delays are added by lab.faults."""
    state = attrs["State"]
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
