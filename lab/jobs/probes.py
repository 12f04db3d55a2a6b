"""Ask the nodes, while the lab is still up, what a run that did not end well needs to be understood.

The run's own words say what to ask (lab/analysis/diagnosis/nodes.py `questions`: paths its errors call missing, a
file:// rendezvous or FileStore, a command that would not start, a variable read from the environment); every node
then answers through the target's transport (docker exec, ssh, a local process), in the environment and working
directory the job had: whether each path exists there and what it is, the nearest name where it does not, where each
command is on its PATH, whether each variable is set, its hostname, interpreter and network interfaces. One short
stdlib-only Python process per node, all nodes at once, PROBE_TIMEOUT seconds at most; a node that does not answer
is recorded as such and never fails the run. The answers go into the run record (StepRecord.probes), which is all
lab/analysis/ reads.
"""

from __future__ import annotations

import json
import threading
import time

from typing import TYPE_CHECKING

from lab.errors import LabError
from lab.jobs.transports import LocalTransport, Transport

if TYPE_CHECKING:
    from lab.analysis.diagnosis import NodeProbes

PROBE_TIMEOUT = 10.0  # seconds every node has to answer, all of them at once
ANSWER_MARK = "LAB-NODE-FACTS "
NOT_FOR_THE_PROBE = ("LAB_RESULTS_DIR",)  # over ssh, a process with it has its results copied back when it ends
# Runs on every node with the interpreter the lab found there (-S -E: no site, no sitecustomize, no PYTHON* variables:
# the job's hooks stay out of it). Reads only: stat, PATH lookups, the environment's names, one folder listing per
# missing path (at most LISTED names of it), the job's scripts (their first MiB) for a FileStore or file:// path
# written in the code, which a rendezvous that times out never prints, and /dev/shm's size and largest files (a
# killed job's segments outlive it there).
PROBE_SCRIPT = r"""
import difflib, json, os, re, shutil, socket, sys
asked = json.loads(sys.argv[1])
LISTED = 2000
SCRIPT_BYTES = 1 << 20
SHM_LISTED = 5

def facts(path):
    absolute = os.path.abspath(path)
    answer = {"path": path, "absolute": absolute, "kind": None, "size": None,
              "parent": os.path.isdir(os.path.dirname(absolute))}
    try:
        st = os.stat(absolute)
        answer["kind"] = "dir" if os.path.isdir(absolute) else "file" if os.path.isfile(absolute) else "other"
        answer["size"] = st.st_size
    except OSError:
        if os.path.islink(absolute):  # the name is there, as a link to nothing
            answer["link"] = os.readlink(absolute)
    existing, missing = absolute, ""
    while not os.path.isdir(existing):
        existing, missing = os.path.dirname(existing), os.path.basename(existing)
    answer["existing"] = existing
    if answer["kind"] is None and missing:
        try:
            names = sorted(os.listdir(existing))[:LISTED]
        except OSError:
            names = []
        close = difflib.get_close_matches(missing, names, 1, 0.6)
        answer["close"] = os.path.join(existing, close[0]) if close else None
    return answer

try:
    interfaces = sorted(os.listdir("/sys/class/net"))
except OSError:
    interfaces = []
def rendezvous_in(script):
    found = []
    try:
        with open(script, errors="replace") as handle:
            text = handle.read(SCRIPT_BYTES)
    except OSError:
        return found
    for number, line in enumerate(text.splitlines(), 1):
        for pattern in asked["rendezvous_patterns"]:
            for match in re.finditer(pattern, line):
                found.append({"path": match["path"], "where": f"{os.path.basename(script)}:{number}",
                              "text": line.strip()[:200]})
    return found[:8]

def shared_memory():  # /dev/shm's size, what is free, and its largest files (what they hold, when last written)
    try:
        st = os.statvfs("/dev/shm")
        files = []
        for entry in os.scandir("/dev/shm"):
            if entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                files.append({"path": entry.path, "size": info.st_blocks * 512, "mtime": info.st_mtime})
    except OSError:
        return {}
    files.sort(key=lambda found: -found["size"])
    return {"size": st.f_blocks * st.f_frsize, "free": st.f_bavail * st.f_frsize, "largest": files[:SHM_LISTED]}

rendezvous = [found for script in asked["scripts"] for found in rendezvous_in(script)]
paths = list(dict.fromkeys([*asked["paths"], *(found["path"] for found in rendezvous)]))
print("LAB-NODE-FACTS " + json.dumps({
    "hostname": socket.gethostname(), "python": sys.executable, "interfaces": interfaces, "rendezvous": rendezvous,
    "paths": {path: facts(path) for path in paths},
    "commands": {name: shutil.which(name) for name in asked["commands"]},
    "env": {name: name in os.environ for name in asked["env"]}, "shm": shared_memory()}))
"""


def shared_folders(transport: Transport, workspace: str | None) -> list[str]:
    """The folders every node sees alike, as the nodes name them, the writable one first; ['/'] for processes on this
    host (one disk); [] for real hosts reached by ssh (their shared_dir and workspace are copies, one per host)."""
    if isinstance(transport, LocalTransport):
        return ["/"]
    if not transport.shares_folder:
        return []
    return [transport.shared_dir, *([workspace] if workspace else []), transport.exercises_dir]


def ask_nodes(transport: Transport, commands: dict[int, tuple[list[str], dict[str, str]]], logs: dict[int, str],
              cwd: str | None, workspace: str | None, timeout: float = PROBE_TIMEOUT) -> NodeProbes:
    """Every node's answers to what the run's logs, command lines and environments name (see the module's doc);
    `cwd` is the job's working directory (None: the transport's), `workspace` the lab's (`lab up --workspace`)."""
    from lab.analysis.diagnosis.evidence import NodeFacts, NodeProbes  # loaded only for a run that failed
    from lab.analysis.diagnosis.nodes import TORCHRUN_ENV, questions

    started = time.monotonic()
    asked = questions((line for text in logs.values() for line in text.splitlines()),
                      [text for argv, env in commands.values() for text in [*argv, *env.values()]])
    answers: dict[int, NodeFacts] = {}

    def ask(index: int) -> None:
        env = {key: value for key, value in commands[index][1].items() if key not in NOT_FOR_THE_PROBE}
        try:
            process = transport.start(index, [transport.python, "-S", "-E", "-c", PROBE_SCRIPT,
                                              json.dumps(asked.to_dict())], env, cwd)
            output = list(process.lines())
            code = process.wait()
        except (LabError, OSError) as error:
            answers[index] = NodeFacts(index, error=str(error)[:200])
            return
        found = next((line[len(ANSWER_MARK):] for line in output if line.startswith(ANSWER_MARK)), None)
        try:
            answers[index] = NodeFacts.from_dict({"node": index, **json.loads(found)}) if found else \
                NodeFacts(index, error=f"no answer (exit {code}): {' '.join(output)[-200:]}")
        except (ValueError, TypeError, KeyError) as error:
            answers[index] = NodeFacts(index, error=f"unreadable answer: {error}")

    threads = [threading.Thread(target=ask, args=(index,), daemon=True) for index in commands]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, started + timeout - time.monotonic()))
    launcher_env = list(TORCHRUN_ENV) if any("torch.distributed.run" in argv for argv, _ in commands.values()) else []
    return NodeProbes(nodes=[answers.get(index) or NodeFacts(index, error=f"did not answer within {timeout:g} s")
                             for index in sorted(commands)],
                      shared=shared_folders(transport, workspace), workspace=workspace, launcher_env=launcher_env,
                      seconds=round(time.monotonic() - started, 2))

