"""The processes of a run on a node, as the machine that runs them sees them, and their Python stacks (py-spy).

Nodes stay unprivileged: for Docker nodes everything here runs on this host (as root), reading /proc and
attaching py-spy to the nodes' processes by their host PIDs, so containers need no ptrace capability.
A container's processes are those in its PID namespace: `docker exec` children hang off containerd's
shim, not off the container's init, so they cannot be found as its descendants.

`scan_processes` and `dump_with_py_spy` use the standard library only: `remote_script` sends their
source to real hosts over ssh, where they run the same way.
"""

from __future__ import annotations

import inspect
import json
import os
from dataclasses import dataclass


class StacksUnavailable(Exception):
    """A node's processes or stacks cannot be read; the message says why (recorded, never fatal to a run)."""


@dataclass(frozen=True)
class JobProcess:
    """One process of a run: ids as the machine running it sees them, and the environment that places it."""

    node: int
    pid: int  # host PID (for Docker nodes: in this host's PID namespace, which is what py-spy needs)
    ppid: int
    cmdline: list[str]
    env: dict[str, str]  # only the variables in KEPT_ENV / KEPT_ENV_PREFIXES, never the whole environment

    @classmethod
    def from_dict(cls, node: int, data: dict) -> JobProcess:
        return cls(node, int(data["pid"]), int(data["ppid"]), list(data["cmdline"]), dict(data["env"]))


def scan_processes(run_id: str, node: str, namespace_pid: int | None = None) -> list[dict]:
    """Processes whose LAB_NODE is `node` and LAB_RUN_ID is `run_id` or one of its steps ('<run>-<step>'; '' = any run).

    With `namespace_pid`, only processes in the PID namespace of that process (a container's init).
    Self-contained (runs on remote hosts from its source): {pid, ppid, cmdline, env} dicts, env filtered.
    """
    import os

    kept = {"LAB_RUN_ID", "LAB_NODE", "LAB_STEP", "NODE_RANK", "NNODES", "NPROC_PER_NODE", "MASTER_ADDR",
            "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
            "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}
    kept_prefixes = ("TORCHELASTIC_",)

    def namespace(pid) -> str | None:
        try:
            return os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:
            return None

    wanted_namespace = namespace(namespace_pid) if namespace_pid else None
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                pairs = (item.split(b"=", 1) for item in handle.read().split(b"\0") if b"=" in item)
                env = {key.decode(errors="replace"): value.decode(errors="replace") for key, value in pairs}
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = [arg.decode(errors="replace") for arg in handle.read().split(b"\0")[:-1]]
            with open(f"/proc/{pid}/stat", "rb") as handle:
                ppid = int(handle.read().rsplit(b")", 1)[1].split()[1])  # the name in (...) may hold spaces
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
        owner = env.get("LAB_RUN_ID", "")
        if int(pid) == os.getpid() or env.get("LAB_NODE") != node or not owner:
            continue
        if run_id and not (owner == run_id or owner.startswith(run_id + "-")):
            continue
        if wanted_namespace and namespace(pid) != wanted_namespace:
            continue
        found.append({"pid": int(pid), "ppid": ppid, "cmdline": cmdline,
                      "env": {k: v for k, v in env.items() if k in kept or k.startswith(kept_prefixes)}})
    return sorted(found, key=lambda process: process["pid"])


def dump_with_py_spy(pids: list[int], py_spy: str | None = None, timeout: float = 5) -> dict[str, list | str]:
    """pid -> py-spy's JSON threads (`py-spy dump --json --locals`), or one line saying why there is none.

    py-spy pauses a process while it reads it; one that cannot be paused within `timeout` (stopped, or its
    container paused) is read without pausing (--nonblocking), which is exact for a process that waits.
    Self-contained (runs on remote hosts from its source). py-spy is looked for next to this Python,
    then on PATH. It needs root, or ptrace rights over the processes.
    """
    import json
    import os
    import platform
    import shutil
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    beside_python = os.path.join(os.path.dirname(sys.executable), "py-spy")
    py_spy = py_spy or (beside_python if os.access(beside_python, os.X_OK) else shutil.which("py-spy"))
    if not py_spy:
        return {str(pid): f"py-spy is not installed on {platform.node()} (pip install py-spy)" for pid in pids}

    def dump(pid: int) -> list | str:
        for extra in ([], ["--nonblocking"]):
            try:
                result = subprocess.run([py_spy, "dump", "--json", "--locals", *extra, "--pid", str(pid)],
                                        capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                continue
            if result.returncode == 0:
                try:
                    return json.loads(result.stdout)
                except ValueError:
                    pass
            lines = [line.strip() for line in (result.stderr or result.stdout).splitlines() if line.strip()]
            return lines[0].removeprefix("Error: ") if lines else f"py-spy exited with {result.returncode}"
        return f"py-spy could not read the process within {timeout:g} s"

    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(zip(map(str, pids), pool.map(dump, pids)))


def remote_script(function, *args) -> str:
    """Python source that runs `function(*args)` (self-contained, literal arguments) and prints its JSON result."""
    return f"{inspect.getsource(function)}\nimport json\nprint(json.dumps({function.__name__}(*{args!r})))\n"


def host_processes(run_id: str, index: int) -> list[JobProcess]:
    """Processes of `run_id` on node `index` when the 'nodes' are process groups on this host (--driver local)."""
    return [JobProcess.from_dict(index, data) for data in scan_processes(run_id, str(index))]


def container_processes(driver, lab_name: str, index: int, run_id: str) -> list[JobProcess]:
    """Processes of `run_id` in node `index` of lab `lab_name`, with the host PIDs py-spy attaches to."""
    from lab.nodes.driver import engine_errors

    with engine_errors(f"describe node{index}"):
        init_pid = int(driver.container(lab_name, index).attrs["State"].get("Pid") or 0)
    if not init_pid:
        raise StacksUnavailable(f"node{index} is not running")
    if os.geteuid() != 0:
        raise StacksUnavailable("reading the nodes' processes needs root on this host (run lab as root)")
    if not os.path.exists(f"/proc/{init_pid}"):
        raise StacksUnavailable("the engine's processes are not visible from this host (Docker in a VM?)")
    return [JobProcess.from_dict(index, data) for data in scan_processes(run_id, str(index), init_pid)]


def host_stacks(pids: list[int]) -> dict[int, list | str]:
    """py-spy on this host (Docker nodes, seen by host PID, and --driver local): pid -> threads or why none."""
    return {int(pid): dump for pid, dump in dump_with_py_spy(pids).items()}


def parse_remote(output: str) -> object:
    """The JSON a `remote_script` printed (its last line: anything the login shell printed before is skipped)."""
    lines = output.strip().splitlines()
    if not lines:
        raise StacksUnavailable("no output")
    try:
        return json.loads(lines[-1])
    except ValueError:
        raise StacksUnavailable(lines[-1][:200]) from None
