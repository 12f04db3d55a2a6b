"""Ways to start a process on a node and stream its output: inside a container, or on this host.

The runner only sees this interface, so the same launch logic drives Docker nodes and
plain host processes (used for native comparisons in bench/ and for quick iteration).
"""

from __future__ import annotations

import hashlib
import io
import os
import shlex
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator, Protocol

from lab.nodes.driver import ENGINE_HINT
from lab.nodes.faults import faults_between
from lab.nodes.processes import (JobProcess, StacksUnavailable, container_processes, dump_with_py_spy, host_processes,
                                 host_stacks, parse_remote, remote_script, scan_processes)
from lab import paths
from lab.errors import EngineError, LabStateError, RunError
from lab.jobs.staging import CopyPlan
from lab.locks import HeldLock, holder, try_lock
from lab.lines import pipe_lines
from lab.model.spec import EXERCISES_MOUNT, SHARED_MOUNT

# Runs inside a node: kill the processes of one run (or one step: ids are '<run>-<step>'), found by the
# LAB_RUN_ID/LAB_NODE in their environment.
# mode "all" kills every process of the run; "worker" kills one torchrun worker (a process with LOCAL_RANK).
KILL_SCRIPT = r"""
import os, signal, sys
run_id, node, mode = sys.argv[1], sys.argv[2], sys.argv[3]
me = os.getpid()
victims = []
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        with open(f'/proc/{pid}/environ', 'rb') as handle:
            env = dict(item.split(b'=', 1) for item in handle.read().split(b'\0') if b'=' in item)
    except OSError:
        continue
    owner = env.get(b'LAB_RUN_ID', b'').decode()
    if int(pid) == me or env.get(b'LAB_NODE') != node.encode() or not (owner == run_id or owner.startswith(run_id + '-')):
        continue
    if mode == 'worker' and b'LOCAL_RANK' not in env:
        continue
    victims.append(int(pid))
killed = 0
for pid in sorted(victims)[: 1 if mode == 'worker' else None]:
    try:
        os.kill(pid, signal.SIGKILL)
        killed += 1
    except ProcessLookupError:
        pass
print(killed)
"""


# Runs on the master node: bind the port (0: any free one) the way a TCPStore would; print it, or -1 if taken.
PORT_PROBE = r"""
import socket, sys
probe = socket.socket()
probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    probe.bind(("", int(sys.argv[1])))
except OSError:
    print(-1)
else:
    print(probe.getsockname()[1])
"""
DEFAULT_MASTER_PORT = 29500
TAKEN_DOWN_WAIT = 10.0  # seconds the engine may take to say that a node it still calls running is being removed
FREE_PORT_ATTEMPTS = 20  # any free port the probe offers that another run reserved meanwhile: ask again


class PortReservations:
    """The rendezvous ports that live runs on one target hold: one flock'd file per port in `folder`, on this host.

    A probe binds a port and lets it go, so two runs that start together would both find 29500 free; a run
    reserves its port here before it probes it, and keeps it until its next step picks one (or it ends: the
    kernel drops the lock of a process that died).
    """

    def __init__(self, folder: Path):
        self.folder = folder
        self.held: HeldLock | None = None

    def reserve(self, port: int) -> bool:
        """Hold `port` for this run, letting go of the one it held before; False when another live run holds it."""
        self.release()
        self.held = try_lock(self.path(port))
        return self.held is not None

    def release(self) -> None:
        if self.held is not None:
            self.held.release()
            self.held = None

    def path(self, port: int) -> Path:
        return self.folder / f"{port}.lock"


def choose_port(probe: Callable[[int], int], wanted: int | None, where: str, reservations: PortReservations) -> int:
    """The wanted port if free (error if taken); else the usual 29500, or any free port when that is taken.

    Only a port reserved for this run and found free by `probe` is chosen, so two runs never get the same one.
    """
    if wanted is not None:
        if not reservations.reserve(wanted):
            raise RunError(f"port {wanted} on {where} is reserved by another run: {holder(reservations.path(wanted))}",
                           "choose another --master-port, or leave it out to get a free one")
        if probe(wanted) != wanted:
            reservations.release()
            raise RunError(f"port {wanted} is already in use on {where}",
                           "choose another --master-port, or leave it out to get a free one")
        return wanted
    if reservations.reserve(DEFAULT_MASTER_PORT) and probe(DEFAULT_MASTER_PORT) == DEFAULT_MASTER_PORT:
        return DEFAULT_MASTER_PORT
    for _ in range(FREE_PORT_ATTEMPTS):
        port = probe(0)
        if port > 0 and reservations.reserve(port):
            return port
    reservations.release()
    raise RunError(f"found no free port for the rendezvous on {where}", "pass a free one with --master-port")


class NodeProcess(Protocol):
    def lines(self) -> Iterator[str]: ...
    def wait(self) -> int | None: ...


class Transport(Protocol):
    """Starts processes on node `index` and kills them by run id."""

    python: str
    exercises_dir: str
    shared_dir: str  # the shared folder as nodes see it
    host_shared_dir: Path  # the same folder as this host sees it
    shares_folder: bool  # whether host_shared_dir *is* the nodes' folder (a mount, this host), not a copy pushed over
    master_addr: str

    def start(self, index: int, argv: list[str], env: dict[str, str], cwd: str | None = None) -> NodeProcess: ...
    def kill(self, index: int, run_id: str, mode: str = "all") -> int: ...
    def pick_port(self, wanted: int | None = None) -> int: ...
    def oom_kills(self, index: int) -> int | None: ...
    def check_alive(self) -> None: ...
    def processes(self, index: int, run_id: str) -> list[JobProcess]: ...
    def dump_stacks(self, index: int, pids: list[int]) -> dict[int, list | str]: ...
    def faults(self) -> list[tuple[int, str]]: ...
    def faults_set_by_hand(self, start: float, end: float) -> list[tuple[float, int, str]]: ...


class DockerTransport:
    """Every node is a container of lab `lab_name`; the driver starts processes in it with `docker exec`."""

    python = "/opt/lab-venv/bin/python"
    exercises_dir = EXERCISES_MOUNT
    shared_dir = SHARED_MOUNT
    shares_folder = True
    master_addr = "node0"

    def __init__(self, driver, lab_name: str, host_shared_dir: Path, python: str | None = None):
        self.driver = driver
        self.lab_name = lab_name
        self.host_shared_dir = host_shared_dir
        self.python = python or driver.node_python(lab_name) or self.python  # `--image host` nodes run the host's
        self.ports = PortReservations(host_shared_dir.parent / "ports")

    def start(self, index: int, argv: list[str], env: dict[str, str], cwd: str | None = None) -> NodeProcess:
        try:
            return self.driver.start_process(self.lab_name, index, argv, {**env, "LAB_NODE": str(index)},
                                             cwd or SHARED_MOUNT)
        except EngineError:
            self.check_alive()  # the lab was taken down under the run: say that instead
            raise

    def kill(self, index: int, run_id: str, mode: str = "all") -> int:
        try:
            _, output = self.driver.exec_output(self.lab_name, index, [self.python, "-c", KILL_SCRIPT, run_id, str(index), mode])
            return int(output.strip() or 0)
        except (EngineError, ValueError):  # a stopped or removed container has nothing left to kill
            return 0

    def pick_port(self, wanted: int | None = None) -> int:
        def probe(port: int) -> int:
            try:
                if port > 0 and (listening := self.driver.listening_ports_seen_from_host(self.lab_name, 0)) is not None:
                    return -1 if port in listening else port  # read from this machine: no process in the node
                code, output = self.driver.exec_output(self.lab_name, 0, [self.python, "-c", PORT_PROBE, str(port)])
            except EngineError:
                self.check_alive()  # the lab was taken down under the run: say that instead
                raise
            return int(output.strip() or -1) if code == 0 else -1

        return choose_port(probe, wanted, "node0", self.ports)

    def oom_kills(self, index: int) -> int | None:
        """OOM kills so far in the node's memory cgroup (v1 or v2), read from this machine where it can, else from
        inside the node; None when unknown."""
        try:
            seen = self.driver.oom_kills_seen_from_host(self.lab_name, index)
            if seen is not None:
                return seen
            _, output = self.driver.exec_output(self.lab_name, index, ["cat", "/sys/fs/cgroup/memory.events",
                                                                      "/sys/fs/cgroup/memory/memory.oom_control"])
        except EngineError:
            return None
        for line in output.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return None

    def check_alive(self) -> None:
        """Raise when the engine stopped answering or the lab was taken down (streams then end without exit codes)."""
        if not self.driver.engine_answers():
            raise EngineError("lost the Docker engine during the run", ENGINE_HINT)
        if self.taken_down():
            raise LabStateError(f"lab '{self.lab_name}' was taken down during the run (`lab down` removed its nodes)",
                                f"bring it up again (`lab up --name {self.lab_name}` with its options), then rerun")

    def taken_down(self) -> bool:
        """The lab's nodes are gone or going: `lab down` removes every one; a fault stops or kills, never removes.

        The engine still calls a node 'running' for a moment after `lab down` killed it: a node that says so but no
        longer runs a command is looked at again until the engine has made up its mind.
        """
        deadline = time.monotonic() + TAKEN_DOWN_WAIT
        while True:
            try:
                spec = self.driver.existing_spec(self.lab_name)
                states = self.driver.container_states(self.lab_name)
            except EngineError:
                return False
            if spec is None or len(states) < spec.nodes or any(state in ("removing", "dead") for state in states.values()):
                return True
            running = [index for index, state in states.items() if state == "running"]
            if all(self._answers(index) for index in running) or time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def _answers(self, index: int) -> bool:
        try:
            return self.driver.exec_output(self.lab_name, index, ["true"])[0] == 0
        except EngineError:
            return False

    def processes(self, index: int, run_id: str) -> list[JobProcess]:
        """The run's processes in node `index` ('' = every run), by host PID: stacks are read from the host."""
        return container_processes(self.driver, self.lab_name, index, run_id)

    def dump_stacks(self, index: int, pids: list[int]) -> dict[int, list | str]:
        """py-spy on this host, attached by host PID: the node needs no ptrace capability."""
        return host_stacks(pids)

    def faults(self) -> list[tuple[int, str]]:
        """Lab faults in force now (killed, paused, partitioned nodes): what a diagnosis must know first."""
        try:
            return [(state.index, fault) for state in self.driver.node_states(self.lab_name) for fault in state.faults]
        except EngineError:
            return []

    def faults_set_by_hand(self, start: float, end: float) -> list[tuple[float, int, str]]:
        """(when, node, action) of each `lab fault` set or healed on this lab from `start` to `end`."""
        return faults_between(self.lab_name, start, end)


class LocalProcess:
    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path):
        self.popen = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True)

    def lines(self) -> Iterator[str]:
        """Whole lines of stdout and stderr, each pipe read apart (a line cut on one is never glued to the other)."""
        yield from pipe_lines(self.popen.stdout, self.popen.stderr)

    def wait(self) -> int | None:
        return self.popen.wait()


class LocalTransport:
    """Every 'node' is a process group on this host; MASTER_ADDR is loopback."""

    master_addr = "127.0.0.1"
    shares_folder = True

    def __init__(self, host_shared_dir: Path, exercises_dir: Path):
        self.python = sys.executable
        self.exercises_dir = str(exercises_dir)
        self.host_shared_dir = host_shared_dir
        self.shared_dir = str(host_shared_dir)
        self.ports = PortReservations(paths.host_ports_dir())  # this host's ports, whichever .lab/ runs here

    def start(self, index: int, argv: list[str], env: dict[str, str], cwd: str | None = None) -> LocalProcess:
        self.host_shared_dir.mkdir(parents=True, exist_ok=True)
        return LocalProcess(argv, {**os.environ, **env, "LAB_NODE": str(index)}, Path(cwd or self.host_shared_dir))

    def kill(self, index: int, run_id: str, mode: str = "all") -> int:
        result = subprocess.run([self.python, "-c", KILL_SCRIPT, run_id, str(index), mode], capture_output=True, text=True)
        return int(result.stdout.strip() or 0)

    def pick_port(self, wanted: int | None = None) -> int:
        def probe(port: int) -> int:
            result = subprocess.run([self.python, "-c", PORT_PROBE, str(port)], capture_output=True, text=True)
            return int(result.stdout.strip() or -1)

        return choose_port(probe, wanted, "this host", self.ports)

    def oom_kills(self, index: int) -> int | None:
        return None

    def check_alive(self) -> None:
        pass

    def processes(self, index: int, run_id: str) -> list[JobProcess]:
        return host_processes(run_id, index)

    def dump_stacks(self, index: int, pids: list[int]) -> dict[int, list | str]:
        return host_stacks(pids)

    def faults(self) -> list[tuple[int, str]]:
        return []  # processes on this host: the lab injects no node faults here

    def faults_set_by_hand(self, start: float, end: float) -> list[tuple[float, int, str]]:
        return []


@dataclass(frozen=True)
class SshHost:
    """How this machine reaches one real node: address, port, user, key and extra ssh options."""

    name: str
    address: str
    port: int = 22
    user: str | None = None
    key: Path | None = None
    ssh_options: tuple[str, ...] = ("-o", "StrictHostKeyChecking=accept-new")

    def ssh_argv(self) -> list[str]:
        """`ssh` that never prompts (BatchMode): a missing key or unknown host fails at once instead of hanging."""
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-p", str(self.port)]
        if self.key:
            argv += ["-i", str(self.key), "-o", "IdentitiesOnly=yes"]
        return argv + list(self.ssh_options) + [f"{self.user}@{self.address}" if self.user else self.address]


def remote_command(argv: list[str], env: dict[str, str], cwd: str) -> str:
    """One shell line for the node's sshd: make and enter `cwd`, then exec argv with env (env K=V ... argv)."""
    assignments = " ".join(shlex.quote(f"{key}={value}") for key, value in env.items())
    return (f"mkdir -p {shlex.quote(cwd)} && cd {shlex.quote(cwd)} && "
            f"exec env {assignments} {shlex.join(argv)}")


class SshProcess(LocalProcess):
    """A local `ssh` client whose output is the remote program's; `after_exit` runs once it ended."""

    def __init__(self, argv: list[str], after_exit: Callable[[], None]):
        self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True)
        self.after_exit = after_exit

    def wait(self) -> int | None:
        code = self.popen.wait()
        self.after_exit()
        return code


class SshTransport:
    """Every node is a real machine reached with `ssh`; no shared filesystem is needed.

    Each node writes its results under its own `shared_dir`; when a node's process ends, the step's
    results folder (LAB_RESULTS_DIR) is copied back over ssh (tar) into `host_shared_dir`, where the
    runner reads it. Fault steps that wait for a trigger file in the work folder need a shared folder.
    """

    shares_folder = False

    def __init__(self, hosts: list[SshHost], host_shared_dir: Path, python: str, exercises_dir: str, shared_dir: str,
                 master_addr: str):
        self.hosts = hosts
        self.host_shared_dir = host_shared_dir
        self.python = python
        self.exercises_dir = exercises_dir
        self.shared_dir = shared_dir
        self.master_addr = master_addr
        self.ports = PortReservations(host_shared_dir.parent / "ports")

    def _run(self, index: int, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(self.hosts[index].ssh_argv() + [command], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout)

    def start(self, index: int, argv: list[str], env: dict[str, str], cwd: str | None = None) -> SshProcess:
        env = {**env, "LAB_NODE": str(index)}
        results = env.get("LAB_RESULTS_DIR")
        command = remote_command(argv, env, cwd or self.shared_dir)
        return SshProcess(self.hosts[index].ssh_argv() + [command],
                          lambda: self.fetch(index, results) if results else None)

    def fetch(self, index: int, node_folder: str) -> None:
        """Copy `node_folder` (inside shared_dir on the node) to the same place under host_shared_dir."""
        try:
            relative = PurePosixPath(node_folder).relative_to(self.shared_dir)
            result = self._run(index, f"tar -C {shlex.quote(self.shared_dir)} -cf - {shlex.quote(str(relative))}")
            if result.returncode == 0:
                with tarfile.open(fileobj=io.BytesIO(result.stdout)) as archive:
                    archive.extractall(self.host_shared_dir, filter="data")
        except (ValueError, OSError, subprocess.TimeoutExpired, tarfile.TarError):
            pass  # nothing came back: the checks report the ranks whose results are missing

    def push(self, relative: str) -> None:
        """Copy host_shared_dir/relative to the same place under every node's shared_dir (tar over ssh)."""
        archive_bytes = io.BytesIO()
        with tarfile.open(fileobj=archive_bytes, mode="w") as archive:
            archive.add(self.host_shared_dir / relative, arcname=relative)
        command = f"mkdir -p {shlex.quote(self.shared_dir)} && tar -C {shlex.quote(self.shared_dir)} -xf -"
        for host in self.hosts:
            try:
                result = subprocess.run(host.ssh_argv() + [command], input=archive_bytes.getvalue(),
                                        capture_output=True, timeout=300)
                reason = (result.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            except subprocess.TimeoutExpired:
                result, reason = None, "timed out"
            if result is None or result.returncode != 0:
                raise RunError(f"cannot copy {relative} to {host.name} ({host.address}:{host.port}): {reason}",
                               f"check that {self.shared_dir} (lab_shared_dir) is writable there")

    def sync_folder(self, plan: CopyPlan, destination: str) -> list[str]:
        """Copy the files of `plan` to `destination` on every host whose last copy differs (its stamp is kept in the
        host's shared_dir, per host: that folder may be shared); the names of the hosts it copied to. Files are added
        or replaced, none removed."""
        folder = f"{self.shared_dir}/workspaces/{hashlib.sha256(destination.encode()).hexdigest()[:16]}"
        stamp, archive, copied = plan.stamp(), None, []
        for index, host in enumerate(self.hosts):
            marker = f"{folder}/{host.name}"
            try:
                if self._run(index, f"cat {shlex.quote(marker)} 2>/dev/null").stdout.decode().strip() == stamp:
                    continue
                archive = archive if archive is not None else plan.archive()
                command = (f"mkdir -p {shlex.quote(destination)} && tar -C {shlex.quote(destination)} -xf - && "
                           f"mkdir -p {shlex.quote(str(PurePosixPath(marker).parent))} && "
                           f"printf %s {stamp} > {shlex.quote(marker)}")
                result = subprocess.run(host.ssh_argv() + [command], input=archive, capture_output=True, timeout=300)
                reason = (result.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            except subprocess.TimeoutExpired:
                result, reason = None, "timed out"
            if result is None or result.returncode != 0:
                raise RunError(f"cannot copy the workspace {destination} to {host.name} ({host.address}:{host.port}): "
                               f"{reason}", f"check that {destination} can be written there (or is the same shared "
                               "folder), or leave lab_workspace out of the inventory")
            copied.append(host.name)
        return copied

    def kill(self, index: int, run_id: str, mode: str = "all") -> int:
        command = shlex.join([self.python, "-c", KILL_SCRIPT, run_id, str(index), mode])
        try:
            return int(self._run(index, command).stdout.strip() or 0)
        except (ValueError, subprocess.TimeoutExpired):
            return 0

    def pick_port(self, wanted: int | None = None) -> int:
        def probe(port: int) -> int:
            host = self.hosts[0]
            try:
                result = self._run(0, shlex.join([self.python, "-c", PORT_PROBE, str(port)]))
            except subprocess.TimeoutExpired:
                result = subprocess.CompletedProcess([], 255, b"", b"timed out")
            if result.returncode != 0:
                reason = (result.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
                raise RunError(f"cannot run {self.python} on {host.name} ({host.address}:{host.port}): {reason}",
                               "check the inventory's address, port, user, key and lab_python")
            return int(result.stdout.strip() or -1)

        return choose_port(probe, wanted, self.hosts[0].name, self.ports)

    def oom_kills(self, index: int) -> int | None:
        return None

    def check_alive(self) -> None:
        """Raise RunError naming the first node that no longer answers ssh (streams ended without exit codes)."""
        for index, host in enumerate(self.hosts):
            try:
                answered = self._run(index, "true", timeout=20).returncode == 0
            except subprocess.TimeoutExpired:
                answered = False
            if not answered:
                raise RunError(f"lost {host.name} ({host.address}:{host.port}) during the run",
                               f"check that `ssh -p {host.port} {host.address}` still works")

    def processes(self, index: int, run_id: str) -> list[JobProcess]:
        """The run's processes on the host, read there by the same scan as on this machine."""
        script = remote_script(scan_processes, run_id, str(index))
        return [JobProcess.from_dict(index, data) for data in self._remote_json(index, script, 60)]

    def dump_stacks(self, index: int, pids: list[int]) -> dict[int, list | str]:
        """py-spy on the host itself, when it has one; else each pid says that it has none."""
        script = remote_script(dump_with_py_spy, pids)
        return {int(pid): dump for pid, dump in self._remote_json(index, script, 60 + 30 * len(pids)).items()}

    def faults(self) -> list[tuple[int, str]]:
        return []  # real hosts: the lab injects no node faults there

    def faults_set_by_hand(self, start: float, end: float) -> list[tuple[float, int, str]]:
        return []

    def _remote_json(self, index: int, script: str, timeout: float):
        try:
            result = self._run(index, shlex.join([self.python, "-c", script]), timeout=timeout)
        except subprocess.TimeoutExpired:
            raise StacksUnavailable(f"{self.hosts[index].name} did not answer within {timeout:g} s") from None
        if result.returncode != 0:
            reason = (result.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            raise StacksUnavailable(f"{self.hosts[index].name}: {reason}")
        return parse_remote(result.stdout.decode(errors="replace"))


def pump(process: NodeProcess, on_line: Callable[[str], None], on_exit: Callable[[int | None], None]) -> threading.Thread:
    """Read a node's output on a thread; report each line and then the exit status."""

    def run():
        for line in process.lines():
            on_line(line)
        on_exit(process.wait())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
