"""Lab lifecycle: up, status, down. Glue between the model, the image, Docker and ansible.

`up` gathers what the host offers (`host_facts`), plans the lab (`build_plan`, pure), has the driver
apply the plan, waits for ssh and provisions; `plan_up` (`lab up --dry-run`) stops after planning.
"""

from __future__ import annotations

import shutil
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from lab import paths
from lab.errors import EngineError, LabStateError, ProvisionError
from lab.model.spec import LabSpec
from lab.nodes.driver import DockerDriver, NodeState, engine_errors
from lab.nodes.faults import recorded_delays
from lab.nodes.gpus import detect_host
from lab.nodes.plan import HostFacts, LabPlan, build_plan
from lab.nodes.sshkeys import checked_key, ensure_key, key_paths
from lab.provision.ansible import ProvisionResult, run_playbook, write_inventory

Progress = Callable[[str], None]
SSH_WAIT_SECONDS = 60
NO_ENGINE_NOTE = "no Docker engine answers: planned without one, so no NVIDIA toolkit runtime is known"


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
    plan = build_plan(spec, host_facts(spec, driver))
    spec = plan.spec  # the lab records what `--gpus auto` found
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
    image = ensure_image(spec, driver, rebuild, progress)  # the tag the plan names: both hash the same inputs
    # A new lab gets a new key; a leftover key from a crashed lab is worth nothing.
    ensure_key(paths.lab_dir(spec.name) / "ssh", f"lab-{spec.name}", fresh=current is None)
    progress(f"starting {spec.nodes} node(s)")
    try:
        driver.apply(plan)
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
                    notices=plan.notices, provision=provisioned)


def plan_up(spec: LabSpec) -> tuple[LabPlan, list[str]]:
    """What `lab up` would make, and notes on what it would do first; creates nothing, works without an engine."""
    try:
        driver = DockerDriver()
    except EngineError:
        return build_plan(spec, host_facts(spec, None)), [NO_ENGINE_NOTE]
    plan = build_plan(spec, host_facts(spec, driver))
    plan.spec.check_fits(*driver.host_resources())
    notes = []
    current = driver.existing_spec(spec.name)
    if current is not None and current.fingerprint() == plan.spec.fingerprint():
        notes.append(f"lab '{spec.name}' is already up with this spec: `lab up` would change nothing")
    elif current is not None:
        notes.append(f"lab '{spec.name}' is up with a different spec ({describe(current)}): "
                     "`lab up` refuses it without --recreate")
    image = plan.containers[0].image
    if not driver.has_image(image):
        notes.append(f"image {image} is not in the engine yet: `lab up` makes it first")
    return plan, notes


def host_facts(spec: LabSpec, driver: DockerDriver | None) -> HostFacts:
    """What planning `spec` needs from this host; only looks. No driver (no engine): no runtime is known."""
    from lab.nodes.host_image import host_folders, host_python

    lab_dir = paths.lab_dir(spec.name)
    python = host_python() if spec.image == "host" else None
    return HostFacts(gpus=detect_host(driver.runtimes() if driver else set()), image=image_tag(spec, driver),
                     shared_dir=lab_dir / "shared", exercises_dir=paths.resource("exercises"),
                     public_key=key_paths(lab_dir / "ssh")[1], python=python,
                     host_folders=host_folders(python) if python else ())


def image_tag(spec: LabSpec, driver: DockerDriver | None) -> str:
    """The tag of the image `spec`'s nodes run, whether or not it is made yet."""
    if spec.image == "host":
        from lab.nodes.host_image import host_image_inputs

        with engine_errors("look for the host image's sshd"):
            return host_image_inputs(driver.client if driver else None).tag
    from lab.nodes.image import node_image_tag

    return node_image_tag()


def ensure_image(spec: LabSpec, driver: DockerDriver, rebuild: bool, progress: Progress) -> str:
    """Make the nodes' image unless the engine has it; its tag."""
    if spec.image == "host":
        from lab.nodes.host_image import ensure_host_image

        return ensure_host_image(driver.client, progress)
    from lab.nodes.image import ensure_node_image  # building pulls in the image toolchain; status/down need none of it

    return ensure_node_image(driver.client, progress, rebuild=rebuild)


def provision(name: str, driver: DockerDriver | None = None) -> ProvisionResult:
    """(Re)run the provisioning playbook on every node of lab `name`; fail if any node fails."""
    driver, spec, states = require(name, driver)
    key, _ = checked_key(paths.lab_dir(name) / "ssh")
    python = driver.node_python(name)
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
