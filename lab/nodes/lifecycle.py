"""Lab lifecycle: up, status, down. Glue between the model, the image, Docker and ansible."""

from __future__ import annotations

import dataclasses
import shutil
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from lab import paths
from lab.nodes.driver import DockerDriver, MountPlan, NodeState, node_python
from lab.errors import LabStateError, ProvisionError

from lab.nodes.faults import recorded_delays
from lab.nodes.gpus import TOOLKIT_CAPABILITIES, GpuPlan, detect_host, plan_gpus
from lab.provision.ansible import ProvisionResult, run_playbook, write_inventory
from lab.model.spec import PYTHON_LABEL, LabSpec
from lab.nodes.sshkeys import checked_key, ensure_key

Progress = Callable[[str], None]
SSH_WAIT_SECONDS = 60


@dataclass
class UpResult:
    spec: LabSpec
    changed: bool
    image: str
    nodes: list[NodeState]
    seconds: float
    notices: list[str] = field(default_factory=list)
    provision: ProvisionResult | None = None


def _quiet(_: str) -> None:
    pass


def up(spec: LabSpec, recreate: bool = False, rebuild: bool = False, progress: Progress = _quiet,
       driver: DockerDriver | None = None) -> UpResult:
    """Bring the lab to `spec`; a no-op when it already is. Never leaves a half-created lab behind."""
    started = time.monotonic()
    driver = driver or DockerDriver()
    gpu_plan = plan_gpus(spec.gpus, spec.nodes, detect_host(driver.runtimes()))
    spec = dataclasses.replace(spec, gpus=gpu_plan.resolved)  # the lab records what `auto` found
    current = driver.existing_spec(spec.name)
    if current is not None and current.fingerprint() != spec.fingerprint():
        if not recreate:
            raise LabStateError(
                f"lab '{spec.name}' is already up with a different spec ({describe(current)})",
                "add --recreate to replace it, or `lab down` first",
            )
        progress(f"removing lab '{spec.name}' to recreate it")
        down(spec.name, driver=driver)
        current = None
    states = driver.node_states(spec.name)
    if current is not None and len(states) == spec.nodes and all(s.state == "running" for s in states):
        return UpResult(spec, False, "", states, time.monotonic() - started)
    spec.check_fits(*driver.host_resources())
    if spec.image == "host":
        from lab.nodes.host_image import ensure_host_image

        image = ensure_host_image(driver.client, progress)
    else:
        from lab.nodes.image import ensure_node_image  # building pulls in the image toolchain; status/down need none of it

        image = ensure_node_image(driver.client, progress, rebuild=rebuild)
    lab_dir = paths.lab_dir(spec.name)
    # A new lab gets a new key; a leftover key from a crashed lab is worth nothing.
    _, public_key = ensure_key(lab_dir / "ssh", f"lab-{spec.name}", fresh=current is None)
    base = MountPlan(shared_dir=lab_dir / "shared", exercises_dir=paths.resource("exercises"), public_key=public_key,
                     cap_add=["NET_ADMIN"] if spec.net_admin else [])
    progress(f"starting {spec.nodes} node(s)")
    try:
        driver.create_lab(spec, image, node_plans(spec, base, gpu_plan), {i: n.label for i, n in enumerate(gpu_plan.nodes)})
        states = driver.node_states(spec.name)
        progress("waiting for every node to answer")
        wait_for_ssh(states)
        progress("provisioning with ansible")
        provisioned = provision(spec.name, driver=driver)
    except BaseException:  # any failure, Ctrl-C included: a new lab is removed again, never left half-made
        if current is None:
            down(spec.name, driver=driver)
        raise
    return UpResult(spec, True, image, driver.node_states(spec.name), time.monotonic() - started,
                    notices=gpu_plan.notices, provision=provisioned)


def node_plans(spec: LabSpec, base: MountPlan, gpu_plan: GpuPlan) -> dict[int, MountPlan]:
    """Each node's MountPlan: `base`, plus the host's Python for `--image host`, plus the node's GPUs."""
    binds, environment, labels = {}, {}, {}
    if spec.image == "host":
        from lab.nodes.host_image import host_binds, host_python, node_environment

        python = host_python()
        binds, environment, labels = host_binds(python), node_environment(python), {PYTHON_LABEL: python.executable}
    plans = {}
    for node, gpus in zip(spec.node_list(), gpu_plan.nodes):
        requests = [{"Driver": "nvidia", "DeviceIDs": gpus.device_ids, "Capabilities": [list(TOOLKIT_CAPABILITIES)]}]
        plans[node.index] = dataclasses.replace(
            base, extra_binds={**binds, **gpus.binds}, devices=gpus.devices,
            device_requests=requests if gpus.device_ids else [], environment={**environment, **gpus.environment},
            labels=labels)
    return plans


def provision(name: str, driver: DockerDriver | None = None) -> ProvisionResult:
    """(Re)run the provisioning playbook on every node of lab `name`; fail if any node fails."""
    driver, spec, states = require(name, driver)
    key, _ = checked_key(paths.lab_dir(name) / "ssh")
    python = node_python(driver.containers(name))
    interpreters = {"python": python, "interpreter": python} if python else {}  # `--image host`: the host's python
    inventory = write_inventory(spec, {s.index: s.ssh_port for s in states}, key, paths.lab_dir(name) / "inventory",
                                **interpreters)
    result = run_playbook(name, inventory)
    if not result.ok:
        failed = [node.summary() for node in result.nodes if not node.ok] or ["no node reported"]
        raise ProvisionError(f"provisioning failed: {'; '.join(failed)}", f"full ansible log: {result.log}")
    return result


def wait_for_ssh(states: list[NodeState], seconds: float = SSH_WAIT_SECONDS) -> None:
    """Every node's sshd sends its banner on the published loopback port."""
    with ThreadPoolExecutor(max_workers=max(1, len(states))) as pool:
        answered = list(pool.map(lambda s: _ssh_banner(s.ssh_port, seconds), states))
    silent = [state.hostname for state, ok in zip(states, answered) if not ok]
    if silent:
        raise LabStateError(f"{', '.join(silent)} did not answer within {seconds:.0f} s",
                            "see `docker logs` of that node's container")


def _ssh_banner(port: int | None, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while port and time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
                if conn.recv(16).startswith(b"SSH-"):
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def require(name: str, driver: DockerDriver | None = None) -> tuple[DockerDriver, LabSpec, list[NodeState]]:
    """The running lab `name`, or a one-line error saying how to get one."""
    driver = driver or DockerDriver()
    spec = driver.existing_spec(name)
    if spec is None:
        others = driver.lab_names()
        hint = f"labs up now: {', '.join(others)}; pass --name" if others else "start one with `lab up --nodes 2`"
        raise LabStateError(f"no lab named '{name}' is up", hint)
    states = driver.node_states(name)
    stopped = [s.hostname for s in states if s.state != "running"]
    if stopped:
        raise LabStateError(f"lab '{name}': {', '.join(stopped)} not running",
                            "`lab fault unpause`/`lab up` again, or `lab up --recreate`")
    return driver, spec, states


def status(name: str | None, driver: DockerDriver | None = None) -> dict[str, dict]:
    """Every lab (or one) with its spec and nodes, for `lab status`."""
    driver = driver or DockerDriver()
    names = [name] if name else driver.lab_names()
    report = {}
    for lab_name in names:
        spec = driver.existing_spec(lab_name)
        if spec is None:
            if name:
                raise LabStateError(f"no lab named '{name}' is up", "start one with `lab up --nodes 2 --name NAME`")
            report[lab_name] = {"spec": None, "nodes": []}
            continue
        delays = recorded_delays(lab_name)
        nodes = []
        for state in driver.node_states(lab_name):
            if str(state.index) in delays:
                state.faults.append(f"delay {delays[str(state.index)]}")
            nodes.append(state.to_dict())
        report[lab_name] = {"spec": spec.to_dict(), "nodes": nodes}
    return report


def down(name: str | None, driver: DockerDriver | None = None) -> dict[str, int]:
    """Remove lab `name` (None: every lab) by label, and its per-lab folder; run records stay."""
    driver = driver or DockerDriver()
    names = [name] if name else driver.lab_names()
    removed = driver.remove_lab(name)
    for lab_name in names:
        shutil.rmtree(paths.lab_dir(lab_name), ignore_errors=True)
    return removed


def describe(spec: LabSpec) -> str:
    parts = [f"{spec.nodes} nodes"]
    if spec.nproc_per_node:
        parts.append(f"{spec.nproc_per_node} proc/node")
    if spec.cpus:
        parts.append(f"{spec.cpus:g} cpus")
    if spec.memory:
        parts.append(f"{spec.memory // 1024**2} MiB")
    if spec.image != "auto":
        parts.append(f"image {spec.image}")
    if spec.gpus != "none":
        parts.append(f"gpus {spec.gpus}")
    return ", ".join(parts)
