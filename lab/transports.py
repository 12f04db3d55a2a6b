"""Ways to start a process on a node and stream its output: inside a container, or on this host.

The runner only sees this interface, so the same launch logic drives Docker nodes and
plain host processes (used for native comparisons in bench/ and for quick iteration).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator, Protocol

from lab.docker_driver import ENGINE_HINT
from lab.errors import EngineError
from lab.spec import EXERCISES_MOUNT, SHARED_MOUNT

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
for pid in sorted(victims)[: 1 if mode == 'worker' else None]:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
print(len(victims))
"""


class NodeProcess(Protocol):
    def lines(self) -> Iterator[str]: ...
    def wait(self) -> int | None: ...


class Transport(Protocol):
    """Starts processes on node `index` and kills them by run id."""

    python: str
    exercises_dir: str
    shared_dir: str  # the shared folder as nodes see it
    host_shared_dir: Path  # the same folder as this host sees it
    master_addr: str

    def start(self, index: int, argv: list[str], env: dict[str, str], cwd: str | None = None) -> NodeProcess: ...
    def kill(self, index: int, run_id: str, mode: str = "all") -> int: ...
    def pick_port(self) -> int: ...
    def oom_kills(self, index: int) -> int | None: ...
    def check_alive(self) -> None: ...


class _LineSplitter:
    """Bytes chunks in, whole text lines out."""

    def __init__(self):
        self.buffer = b""

    def feed(self, chunk: bytes) -> list[str]:
        self.buffer += chunk
        *complete, self.buffer = self.buffer.split(b"\n")
        return [line.decode(errors="replace").rstrip("\r") for line in complete]

    def rest(self) -> list[str]:
        return [self.buffer.decode(errors="replace")] if self.buffer else []


class DockerExecProcess:
    def __init__(self, api, container_id: str, argv: list[str], env: dict[str, str], cwd: str):
        self.api = api
        self.exec_id = api.exec_create(container_id, argv, environment=env, workdir=cwd)["Id"]
        self.stream = api.exec_start(self.exec_id, stream=True)

    def lines(self) -> Iterator[str]:
        splitter = _LineSplitter()
        try:
            for chunk in self.stream:
                yield from splitter.feed(chunk)
        except Exception:  # the engine went away or the container died mid-stream; wait() reports it
            pass
        yield from splitter.rest()

    def wait(self) -> int | None:
        try:
            return self.api.exec_inspect(self.exec_id).get("ExitCode")
        except Exception:
            return None


class DockerTransport:
    python = "/opt/lab-venv/bin/python"
    exercises_dir = EXERCISES_MOUNT
    shared_dir = SHARED_MOUNT
    master_addr = "node0"

    def __init__(self, driver, lab_name: str, host_shared_dir: Path, python: str | None = None):
        self.driver = driver
        self.lab_name = lab_name
        self.host_shared_dir = host_shared_dir
        self.python = python or self.python
        self.containers = {int(c.labels["io.lab.node"]): c for c in driver.containers(lab_name)}

    def start(self, index: int, argv: list[str], env: dict[str, str], cwd: str | None = None) -> DockerExecProcess:
        return DockerExecProcess(self.driver.client.api, self.containers[index].id, argv, {**env, "LAB_NODE": str(index)},
                                 cwd or SHARED_MOUNT)

    def kill(self, index: int, run_id: str, mode: str = "all") -> int:
        api = self.driver.client.api
        try:
            exec_id = api.exec_create(self.containers[index].id, [self.python, "-c", KILL_SCRIPT, run_id, str(index), mode])["Id"]
            output = api.exec_start(exec_id)
            return int(output.strip() or 0)
        except Exception:  # a stopped or removed container has nothing left to kill
            return 0

    def pick_port(self) -> int:
        return 29500

    def oom_kills(self, index: int) -> int | None:
        """OOM kills so far in the node's memory cgroup (v1 or v2); None when unknown."""
        try:
            code, output = self.containers[index].exec_run(["cat", "/sys/fs/cgroup/memory.events",
                                                             "/sys/fs/cgroup/memory/memory.oom_control"])
        except Exception:
            return None
        for line in output.decode(errors="replace").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return None

    def check_alive(self) -> None:
        """Raise EngineError when the engine stopped answering (streams then end without exit codes)."""
        try:
            self.driver.client.ping()
        except Exception:
            raise EngineError("lost the Docker engine during the run", ENGINE_HINT) from None


class LocalProcess:
    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path):
        self.popen = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      start_new_session=True)

    def lines(self) -> Iterator[str]:
        for raw in self.popen.stdout:
            yield raw.decode(errors="replace").rstrip("\n")

    def wait(self) -> int | None:
        return self.popen.wait()


class LocalTransport:
    """Every 'node' is a process group on this host; MASTER_ADDR is loopback."""

    master_addr = "127.0.0.1"

    def __init__(self, host_shared_dir: Path, exercises_dir: Path):
        self.python = sys.executable
        self.exercises_dir = str(exercises_dir)
        self.host_shared_dir = host_shared_dir
        self.shared_dir = str(host_shared_dir)

    def start(self, index: int, argv: list[str], env: dict[str, str], cwd: str | None = None) -> LocalProcess:
        self.host_shared_dir.mkdir(parents=True, exist_ok=True)
        return LocalProcess(argv, {**os.environ, **env, "LAB_NODE": str(index)}, Path(cwd or self.host_shared_dir))

    def kill(self, index: int, run_id: str, mode: str = "all") -> int:
        result = subprocess.run([self.python, "-c", KILL_SCRIPT, run_id, str(index), mode], capture_output=True, text=True)
        return int(result.stdout.strip() or 0)

    def pick_port(self) -> int:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]

    def oom_kills(self, index: int) -> int | None:
        return None

    def check_alive(self) -> None:
        pass


def pump(process: NodeProcess, on_line: Callable[[str], None], on_exit: Callable[[int | None], None]) -> threading.Thread:
    """Read a node's output on a thread; report each line and then the exit status."""

    def run():
        for line in process.lines():
            on_line(line)
        on_exit(process.wait())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
