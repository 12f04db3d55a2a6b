"""Lab lifecycle: up, status, down. Glue between the model, the image, Docker and ansible.

`up` gathers what the host offers (`host_facts`), plans the lab (`build_plan`, pure), has the driver
apply the plan, waits for ssh and provisions; `plan_up` (`lab up --dry-run`) stops after planning.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from lab import paths
from lab.errors import EngineError, LabError, LabStateError, ProvisionError, SpecError
from lab.locks import HeldLock, holder, try_lock
from lab.model.requirements import pinned_torch
from lab.model.spec import NAME_PATTERN, LabSpec
from lab.nodes.driver import DockerDriver, NodeState, engine_errors, in_parallel
from lab.nodes.faults import recorded_delays
from lab.nodes.gpus import detect_host
from lab.nodes import slurm
from lab.nodes.labels import GPUS_LABEL
from lab.nodes.links import apply_links, check_host, link_state, remove_links
from lab.nodes.plan import HostFacts, LabPlan, build_plan
from lab.nodes.sshkeys import checked_key, ensure_key, key_paths, known_hosts_path, known_names, write_known_hosts
from lab.provision.ansible import ProvisionResult, run_playbook, write_inventory

if TYPE_CHECKING:  # the image toolchain is imported where an image is made, not by every command
    from lab.nodes.image import Target
    from lab.nodes.user_image import ImageFacts

Progress = Callable[[str], None]
SSH_WAIT_SECONDS = 60
IN_FLIGHT_SECONDS = 1.0  # how long an engine request sent before an interruption may still take to land
HOST_KEY_REFUSED = "Host key verification failed"  # ssh's words when StrictHostKeyChecking refuses a host
UNRESOLVED = "unresolved"  # the layer's tag in a dry run before the requirements were ever resolved
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
    phases: dict[str, float] = field(default_factory=dict)  # seconds of each part of a change (`lab up` says them)


def _quiet(_: str) -> None:
    pass


# The labs this process is changing now, with the thread that holds each: `up` calls `down` and `provision`.
_changing: dict[str, tuple[int, HeldLock]] = {}


@contextlib.contextmanager
def changing(name: str) -> Iterator[None]:
    """Hold lab `name`'s lock while this command changes it; a lab another command is changing is a one-line error.

    `lab up`, `lab down` and `lab provision` take it, so two of them never change one lab at once (no duplicate
    containers, no provisioning of a lab being removed). It is an flock: the kernel drops it when the holder dies.
    """
    if not NAME_PATTERN.match(name):
        raise SpecError(f"'{name}' is not a lab name", "lab names are lowercase letters, digits and '-', e.g. --name demo")
    owner = _changing.get(name)
    if owner is not None and owner[0] == threading.get_ident():
        yield  # this command already holds it
        return
    path = paths.state_dir() / "locks" / f"{name}.lock"  # outside labs/NAME/, which `down` removes
    lock = None if owner else try_lock(path)
    if lock is None:
        raise LabStateError(f"lab '{name}' is being changed by {holder(path)}",
                            "wait for that command to finish (it holds the lab until it ends), then try again")
    _changing[name] = (threading.get_ident(), lock)
    try:
        yield
    finally:
        del _changing[name]
        lock.release()


def up(spec: LabSpec, recreate: bool = False, rebuild: bool = False, progress: Progress = _quiet,
       driver: DockerDriver | None = None, whole: Callable[[], None] = lambda: None) -> UpResult:
    """Bring the lab to `spec`; a no-op when it already is. Never leaves a half-created lab behind.

    `whole()` is called the moment the lab is complete, inside the clean-up's reach: an interrupt before it removes a
    new lab; a caller that ignores interrupts from then on never reports as stopped a lab that is up.
    """
    with changing(spec.name):
        return _up(spec, recreate, rebuild, progress, driver, whole)


def _up(spec: LabSpec, recreate: bool, rebuild: bool, progress: Progress, driver: DockerDriver | None,
        whole: Callable[[], None]) -> UpResult:
    started = time.monotonic()
    driver = driver or DockerDriver()
    base = node_base(spec, driver) if spec.image != "host" else None  # looked at once (a user's image is probed)
    resolution_notes: list[str] = []
    if spec.requirements:
        current = driver.existing_spec(spec.name)
        if current is not None and current.requirements != spec.requirements and not recreate:
            raise _different_spec(current)  # before pip downloads anything for a lab that stays as it is
        resolution_notes += resolve_requirements(spec, progress, base).notes  # the layer's tag names the resolved set
    plan = build_plan(spec, host_facts(spec, driver, base))
    spec = plan.spec  # the lab records what `--gpus auto` found
    current = driver.existing_spec(spec.name)
    if current is not None and current.fingerprint() != spec.fingerprint():
        if not recreate:
            raise _different_spec(current)
        progress(f"removing lab '{spec.name}' to recreate it")
        down(spec.name, driver=driver)
        current = None
    image = None  # built (or found) once: a --rebuild must not build it twice
    if current is not None and recreate:
        image = ensure_image(spec, driver, rebuild, progress, base)
        if on_another_image(driver.node_image_ids(spec.name), driver.image_id(image)):
            progress(f"removing lab '{spec.name}' to recreate it on the current node image")
            down(spec.name, driver=driver)
            current = None
    states = driver.node_states(spec.name)
    if current is not None and len(states) == spec.nodes and all(s.state == "running" for s in states):
        apply_links(spec, driver)  # a node restarted or reconnected since has a new, unshaped veth
        whole()
        return UpResult(spec, False, "", states, time.monotonic() - started)
    spec.check_fits(*driver.host_resources())
    if spec.link_profile:
        check_host(spec.link_profile)  # before anything is made: no tc, or a delay on a kernel without netem
    phases: dict[str, float] = {}
    mark = started

    def phase(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        phases[name] = round(now - mark, 2)
        mark = now

    image = image or ensure_image(spec, driver, rebuild, progress, base)  # the tag the plan names: same inputs
    phase("plan and image")
    try:
        # A new lab gets a new key; a leftover key from a crashed lab is worth nothing.
        ensure_key(paths.lab_dir(spec.name) / "ssh", f"lab-{spec.name}", fresh=current is None)
        if spec.scheduler == slurm.SCHEDULER:
            slurm.configure(slurm.slurm_dir(paths.lab_dir(spec.name)), f"lab-{spec.name}",
                            [container.hostname for container in plan.containers],
                            [len(container.labels[GPUS_LABEL].split(",")) if GPUS_LABEL in container.labels else 0
                             for container in plan.containers], spec.cpus, spec.memory, *driver.host_resources())
        progress(f"starting {spec.nodes} node(s)")
        driver.apply(plan)
        states = driver.node_states(spec.name)
        phase("create and start")
        progress("waiting for every node to answer")
        wait_for_ssh(states)
        phase("answer")
        pin_host_keys(spec.name, states, driver)  # the nodes just (re)started: their keys and ports are these now
        phase("pin host keys")
        if spec.link:
            progress(f"shaping the links between nodes to {spec.link}")
            apply_links(spec, driver)
            phase("links")
        progress("provisioning with ansible")
        provisioned = provision(spec.name, driver=driver)
        phase("provision")
        whole()
    except BaseException:  # any failure, Ctrl-C included: a new lab is removed again, never left half-made
        if current is None:
            down(spec.name, driver=driver)
            # A create request already sent when Ctrl-C came may land after the removal listed the lab's objects.
            time.sleep(IN_FLIGHT_SECONDS)
            driver.remove_lab(spec.name)
        raise
    return UpResult(spec, True, image, driver.node_states(spec.name), time.monotonic() - started,
                    notices=plan.notices + resolution_notes, provision=provisioned, phases=phases)


def _different_spec(current: LabSpec) -> LabStateError:
    return LabStateError(f"lab '{current.name}' is already up with a different spec ({describe(current)})",
                         "add --recreate to replace it, or `lab down` first")


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
    if plan.spec.link_profile:
        try:
            check_host(plan.spec.link_profile)
        except LabError as error:
            notes.append(f"`lab up` would refuse --link: {error}")
    image = plan.containers[0].image
    if UNRESOLVED in image:
        notes.append(f"requirements not resolved yet: `lab up` resolves them on this host ({len(spec.requirements)} "
                     "line(s)) and installs them as a layer on the node image")
    elif not driver.has_image(image):
        notes.append(f"image {image} is not in the engine yet: `lab up` makes it first")
    return plan, notes


NEIGHBOUR_LIMIT = Path("/proc/sys/net/ipv4/neigh/default/gc_thresh3")


def host_facts(spec: LabSpec, driver: DockerDriver | None, base: NodeBase | None = None) -> HostFacts:
    """What planning `spec` needs from this host; only looks. No driver (no engine): no runtime is known.
    `base`: the nodes' image as `node_base` found it, when the caller has it already."""
    from lab.nodes.host_image import host_folders, host_python

    lab_dir = paths.lab_dir(spec.name)
    python = host_python() if spec.image == "host" else None
    if spec.user_image:
        base = base or node_base(spec, driver)
    return HostFacts(gpus=detect_host(driver.runtimes() if driver else set()), image=image_tag(spec, driver, base),
                     shared_dir=lab_dir / "shared", exercises_dir=paths.resource("exercises"),
                     public_key=key_paths(lab_dir / "ssh")[1], python=python,
                     host_folders=host_folders(python) if python else (),
                     slurm_dir=slurm.slurm_dir(lab_dir) if spec.scheduler == slurm.SCHEDULER else None,
                     neighbour_limit=_neighbour_limit(),
                     image_python=base.python if spec.user_image else None,
                     image_path=base.path if spec.user_image else None)


def _neighbour_limit() -> int | None:
    try:
        return int(NEIGHBOUR_LIMIT.read_text())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class NodeBase:
    """The image the nodes' packages go on: its tag (made or not), interpreter, platform and torch."""

    tag: str
    python: str
    target: Target
    torch: str
    path: str | None = None  # `--image IMAGE`: PATH for the nodes' processes
    user_image: ImageFacts | None = None  # `--image IMAGE`: what the lab found in it


def node_base(spec: LabSpec, driver: DockerDriver | None) -> NodeBase:
    """The node image (with the torch the requirements pin), or the lab's image of the user's own image."""
    if spec.user_image:
        from lab.nodes.user_image import inspect_user_image, sshd_image, user_image_tag

        if driver is None:
            raise EngineError(f"--image {spec.image}: the image is looked at in the Docker engine, and none answers",
                              "start one with `make engine`")
        facts = inspect_user_image(driver.client, spec.image, spec.python)
        with engine_errors("look for a local image with sshd"):
            tag = user_image_tag(facts, sshd_image(driver.client))
        return NodeBase(tag, facts.python, facts.target(), facts.torch, facts.node_path(), facts)
    from lab.nodes.image import TARGET, node_image_tag, node_pins
    from lab.nodes.packages import NODE_PYTHON

    pins = node_pins(pinned_torch(spec.requirements))
    return NodeBase(node_image_tag(pins), NODE_PYTHON, TARGET, pins["torch"])


def image_tag(spec: LabSpec, driver: DockerDriver | None, base: NodeBase | None = None) -> str:
    """The tag of the image `spec`'s nodes run, whether or not it is made yet."""
    if spec.image == "host":
        from lab.nodes.host_image import host_image_inputs

        with engine_errors("look for the host image's sshd"):
            return host_image_inputs(driver.client if driver else None).tag
    base = base or node_base(spec, driver)
    tag = base.tag
    if spec.requirements:
        from lab.nodes.packages import LAYER_REPOSITORY, cached_resolution

        resolution = cached_resolution(spec.requirements, base.target, base.torch)
        tag = resolution.layer_tag(tag, base.python) if resolution else f"{LAYER_REPOSITORY}:{UNRESOLVED}"
    if spec.scheduler == slurm.SCHEDULER:
        from lab.nodes.slurm_image import slurm_image_tag

        return slurm_image_tag(tag)
    return tag


def resolve_requirements(spec: LabSpec, progress: Progress, base: NodeBase):
    """The spec's requirements resolved and downloaded on this host (no pip at all when nothing changed)."""
    from lab.nodes.packages import resolve

    return resolve(spec.requirements, base.target, base.torch, progress)


def on_another_image(running: set[str], wanted: str | None) -> bool:
    """Whether a lab's nodes run another image than the one `lab up` would give them now (the node image rebuilt,
    or the lab upgraded since they were made): `--recreate` (with `--rebuild`: after building it again) makes them
    again."""
    return wanted is not None and bool(running) and running != {wanted}


def ensure_image(spec: LabSpec, driver: DockerDriver, rebuild: bool, progress: Progress,
                 base: NodeBase | None = None) -> str:
    """Make the nodes' image unless the engine has it; its tag."""
    if spec.image == "host":
        from lab.nodes.host_image import ensure_host_image

        return ensure_host_image(driver.client, progress)
    base = base or node_base(spec, driver)
    if spec.user_image:
        from lab.nodes.user_image import ensure_user_image

        tag = ensure_user_image(driver.client, base.user_image, progress)
    else:
        from lab.nodes.image import ensure_node_image, node_pins  # the image toolchain: status/down need none of it

        tag = ensure_node_image(driver.client, progress, rebuild=rebuild, pins=node_pins(pinned_torch(spec.requirements)))
    if spec.requirements:
        from lab.nodes.packages import ensure_layer

        tag = ensure_layer(driver.client, tag, base.python, resolve_requirements(spec, progress, base),
                           spec.requirements, progress)
    if spec.scheduler == slurm.SCHEDULER:
        from lab.nodes.slurm_image import ensure_slurm_image  # the Slurm variant: built on the node image, when asked

        return ensure_slurm_image(driver.client, tag, progress)
    return tag


def provision(name: str, driver: DockerDriver | None = None) -> ProvisionResult:
    """(Re)run the provisioning playbook on every node of lab `name`; fail if any node fails."""
    with changing(name):
        return _provision(name, driver)


def _provision(name: str, driver: DockerDriver | None) -> ProvisionResult:
    driver, spec, states = require(name, driver)
    key, _ = checked_key(paths.lab_dir(name) / "ssh")
    known_hosts = known_hosts_path(key.parent)
    if not known_hosts.exists():  # a lab started before keys were pinned: pin them now, through the engine
        pin_host_keys(name, states, driver)
    python = driver.node_python(name)
    interpreters = {"python": python, "interpreter": python} if python else {}  # `--image host`: the host's python
    inventory = write_inventory(spec, {s.index: s.ssh_port for s in states}, key, known_hosts,
                                paths.lab_dir(name) / "inventory", **interpreters)
    result = run_playbook(name, inventory)
    if not result.ok:
        refuse_unpinned_host_keys(result, states, known_hosts)
        failed = [node.summary() for node in result.nodes if not node.ok] or ["no node reported"]
        raise ProvisionError(f"provisioning failed: {'; '.join(failed)}", f"full ansible log: {result.log}")
    return result


def pin_host_keys(name: str, states: list[NodeState], driver: DockerDriver) -> None:
    """Write the lab's known_hosts: each node's host key, read through the engine, for `[127.0.0.1]:PORT` and its name.

    ssh (ansible) then accepts nothing else (StrictHostKeyChecking=yes): not another process that took a node's
    port, nor a node whose key changed since it started.
    """
    keys = in_parallel(lambda state: driver.host_public_key(name, state.index), states)
    write_known_hosts(known_hosts_path(paths.lab_dir(name) / "ssh"),
                      {(f"[127.0.0.1]:{state.ssh_port}", state.hostname): key for state, key in zip(states, keys)})


def refuse_unpinned_host_keys(result: ProvisionResult, states: list[NodeState], known_hosts: Path) -> None:
    """A node that ssh refused for its host key is one line naming it and the key, not a provisioning failure."""
    ports = {state.hostname: state.ssh_port for state in states}
    for node in result.nodes:
        if node.ok or HOST_KEY_REFUSED not in node.error or node.host not in ports:
            continue
        address = f"127.0.0.1:{ports[node.host]}"
        if f"[127.0.0.1]:{ports[node.host]}" in known_names(known_hosts):
            raise ProvisionError(f"{node.host}'s SSH host key changed: {address} no longer presents the key pinned in "
                                 f"{known_hosts} when the node started; ssh refused it",
                                 f"if you re-keyed {node.host} yourself, `lab down` and `lab up` pin new keys; "
                                 f"else find what answers on {address} instead of the node")
        raise ProvisionError(f"{node.host}'s SSH host key is not pinned: {known_hosts} has no key for {address}; "
                             "ssh refused it", "`lab up` pins the keys of the nodes it starts; `lab down`, then `lab up`")


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
            if spec.link and state.state == "running":
                nodes[-1]["link"] = link_state(driver, lab_name, state.index)
        report[lab_name] = {"spec": spec.to_dict(), "nodes": nodes}
    return report


def down(name: str | None, driver: DockerDriver | None = None) -> dict[str, int]:
    """Remove lab `name` (None: every lab) by label, and its per-lab folder; run records stay."""
    driver = driver or DockerDriver()
    names = [name] if name else driver.lab_names()
    with contextlib.ExitStack() as held:
        for lab_name in names:
            held.enter_context(changing(lab_name))
        removed = driver.remove_lab(name)
        for lab_name in names:
            shutil.rmtree(paths.lab_dir(lab_name), ignore_errors=True)
            remove_links(lab_name)
    return removed


def owners(driver: DockerDriver | None = None) -> dict[str, str]:
    """Lab name -> owner (LabSpec.owner) of every lab that has one, also of a leftover network or volume alone."""
    return (driver or DockerDriver()).lab_owners()


def describe(spec: LabSpec) -> str:
    parts = [f"{spec.nodes} nodes"]
    if spec.nproc_per_node:
        parts.append(f"{spec.nproc_per_node} proc/node")
    if spec.cpus:
        parts.append(f"{spec.cpus:g} cpus")
    if spec.memory:
        parts.append(f"{spec.memory // 1024**2} MiB")
    if spec.image != "auto":
        parts.append(f"image {spec.image}" + (f" ({spec.python})" if spec.python else ""))
    if spec.gpus != "none":
        parts.append(f"gpus {spec.gpus}")
    if spec.link:
        parts.append(f"link {spec.link}")
    if spec.requirements:
        parts.append(f"packages {' '.join(spec.requirements)}")
    if spec.workspace:
        parts.append(f"workspace {spec.workspace}")
    return ", ".join(parts)
