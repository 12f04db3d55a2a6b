"""The Python stacks of every process of a run, on every node, and where each rank waits.

`capture_stacks` asks the transport for the run's processes on each node (found by LAB_RUN_ID/LAB_NODE
in their environment) and for their stacks (py-spy, every thread), tells torchrun's agent from its
workers, maps workers to ranks, and writes the record's `stacks/` folder:

    stacks/<node>-<pid>.txt   one process, readable: who it is, where it waits, every thread's frames
    stacks/stacks.json        every ProcessStack (ProcessStack.to_dict), for tools
    stacks/summary.txt        one line per process, e.g. `rank 1 node1: init_process_group -> TCPStore connect node0:29500 (train.py:4)`

A node whose processes cannot be read, or a machine without py-spy, is recorded with the reason; it never fails a run.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from lab import paths
from lab.nodes.processes import JobProcess, StacksUnavailable

if TYPE_CHECKING:
    from lab.jobs.transports import Transport

STACK_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "GLOO_SOCKET_IFNAME",
             "NCCL_SOCKET_IFNAME")
STACK_ENV_PREFIXES = ("TORCHELASTIC_",)
# Frames of the standard library, installed packages, generated code and the lab's own job hook (its wrapper of
# torch.distributed's calls, exercises/jobhooks/): not the user's own.
LIBRARY_FILE = re.compile(r"/(site|dist)-packages/|/lib/python\d+(\.\d+)?/|^<|/jobhooks/sitecustomize\.py$")
# torch code that distributes work: a thread waiting in one of these is the one worth naming.
DISTRIBUTED_PACKAGES = ("torch/distributed/", "torch/nn/parallel/", "torch/multiprocessing/")
AGENT_MODULES = ("torch.distributed.run", "torch.distributed.launch")
MAIN_THREAD = "MainThread"


@dataclass(frozen=True)
class Frame:
    function: str  # as py-spy names it: `all_reduce`, `SimpleElasticAgent._invoke_run`, `<module>`
    file: str  # the full path, as the process sees it
    line: int
    short_file: str = ""  # package-relative for libraries (`torch/distributed/rendezvous.py`), the name for scripts
    locals: dict[str, str] = field(default_factory=dict)  # reprs; kept for torch's frames only

    @property
    def location(self) -> str:
        return f"{self.short_file or Path(self.file).name}:{self.line}"

    @property
    def in_torch(self) -> bool:
        return (self.short_file or self.file).startswith("torch/") or "/torch/" in self.file

    @property
    def in_library(self) -> bool:
        return bool(LIBRARY_FILE.search(self.file)) or self.in_torch

    def value(self, name: str) -> str | None:
        """A local's value with the quotes of a string repr taken off; None when not captured."""
        text = self.locals.get(name)
        if text and text.startswith('"') and text.endswith('"'):
            try:
                return json.loads(text)
            except ValueError:
                return text[1:-1]
        return text


@dataclass(frozen=True)
class ThreadStack:
    name: str
    thread_id: int  # the OS thread id, as the process's PID namespace numbers it
    active: bool
    frames: list[Frame]  # innermost last


@dataclass(frozen=True)
class WaitPoint:
    """Where one thread is: the torch call the user's code made, what inside it waits, and the user's line."""

    call: str | None  # "init_process_group", "all_reduce", "DistributedDataParallel", ...; None: not in torch
    detail: str | None  # "TCPStore connect node0:29500", "rendezvous: waiting for the other nodes", ...
    user_frame: Frame | None  # innermost frame of the user's own code
    thread: str = MAIN_THREAD

    @property
    def in_distributed_call(self) -> bool:
        return self.call is not None

    def __str__(self) -> str:
        text = self.call or "not in a distributed call"
        if self.detail:
            text += f" -> {self.detail}"
        if self.user_frame:
            text += f" ({self.user_frame.location})"
        if self.thread != MAIN_THREAD:
            text += f" [thread {self.thread}]"
        return text


@dataclass
class ProcessStack:
    """One process of a run on one node: who it is (agent, worker of a rank, other), and its threads' stacks."""

    node: int
    pid: int | None  # host PID for Docker/local nodes, the machine's own for ssh hosts; None: node unreadable
    role: str  # "agent" (torchrun's), "worker" (a rank), "process" (anything else of the run)
    rank: int | None
    local_rank: int | None
    env: dict[str, str]  # STACK_ENV and TORCHELASTIC_* as the process started with them
    threads: list[ThreadStack] = field(default_factory=list)
    run_id: str = ""  # the process's LAB_RUN_ID ('<run>' or '<run>-<step>')
    ppid: int | None = None
    cmdline: list[str] = field(default_factory=list)
    error: str | None = None  # why there is no stack: not Python, py-spy missing, node not readable, ...
    at_sigterm: bool = False  # written by the process itself as torchrun ended it (no locals), not taken by py-spy

    @property
    def frames(self) -> list[Frame]:
        """The frames of the thread that waits (the one in a distributed call, the main one first), innermost last."""
        waiting = self.waiting()
        thread = next((t for t in self.threads if waiting and t.name == waiting.thread), None)
        return thread.frames if thread else []

    def waiting(self) -> WaitPoint | None:
        """Where the process waits: the thread inside a distributed call (the main one first), else the main thread."""
        if not self.threads:
            return None
        points = [where_it_waits(thread.frames, self.env, thread.name) for thread in self.threads]
        distributed = [point for point, thread in zip(points, self.threads) if _in_distributed_code(thread.frames)]
        ranked = sorted(distributed or points, key=lambda point: point.thread != MAIN_THREAD)
        return ranked[0]

    @property
    def who(self) -> str:
        if self.role == "worker" and self.rank is not None:
            return f"rank {self.rank} node{self.node}"
        if self.pid is None:
            return f"node{self.node}"
        return f"{self.role} node{self.node} pid {self.pid}"

    def summary(self) -> str:
        """One line: `rank 1 node1: init_process_group -> TCPStore connect node0:29500 (train.py:4)`."""
        if self.pid is None:
            return f"{self.who}: stacks unavailable: {self.error}"
        if self.error:
            return f"{self.who}: no stack ({self.error})"
        return f"{self.who}: {self.waiting()}" + (" (its stack as torchrun ended it)" if self.at_sigterm else "")

    def text(self) -> str:
        """The readable file: the process, where it waits, then every thread (most recent call last)."""
        lines = [f"node{self.node} pid {self.pid} (parent {self.ppid}): {shlex.join(self.cmdline)}",
                 f"role {self.role}, rank {self.rank}, local rank {self.local_rank}, run {self.run_id}",
                 "env: " + " ".join(f"{key}={value}" for key, value in sorted(self.env.items())),
                 f"summary: {self.summary()}", ""]
        for thread in self.threads:
            lines.append(f'Thread {thread.thread_id} "{thread.name}"{" (active)" if thread.active else ""}, '
                         "most recent call last:")
            lines += [f"    {frame.function} ({frame.file}:{frame.line})" for frame in thread.frames]
            lines.append("")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["summary"] = self.summary()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> ProcessStack:
        threads = [ThreadStack(thread["name"], thread["thread_id"], thread["active"],
                               [Frame(**frame) for frame in thread["frames"]]) for thread in data.get("threads") or []]
        fields = {key: data.get(key) for key in ("node", "pid", "role", "rank", "local_rank", "ppid", "error")}
        return cls(**fields, env=dict(data.get("env") or {}), threads=threads, run_id=data.get("run_id") or "",
                   cmdline=list(data.get("cmdline") or []), at_sigterm=bool(data.get("at_sigterm")))


def where_it_waits(frames: list[Frame], env: dict[str, str] | None = None, thread: str = MAIN_THREAD) -> WaitPoint:
    """Name the torch call a thread is in (as the user's code called it), what inside it waits, and the user's line.

    `frames` are innermost last. The call is the first torch frame below the user's innermost frame (wrappers
    skipped); without user code (torchrun's agent, a thread started on a torch function) the outermost torch frame.
    """
    user_index = next((i for i in range(len(frames) - 1, -1, -1) if not frames[i].in_library), None)
    below_user = frames[user_index + 1:] if user_index is not None else frames
    torch_frames = [frame for frame in below_user if frame.in_torch and not _is_wrapper(frame)]
    if not torch_frames:
        return WaitPoint(None, None, frames[user_index] if user_index is not None else None, thread)
    call = _display_name(torch_frames[0], imported=_imported(frames, torch_frames[0]))
    detail = next((text for frame in reversed(torch_frames) if (text := _known_wait(frame, env or {}))), None)
    if detail is None and len(torch_frames) > 1:
        innermost = _display_name(torch_frames[-1], imported=_imported(frames, torch_frames[-1]))
        detail = innermost if innermost != call else None
    return WaitPoint(call, detail, frames[user_index] if user_index is not None else None, thread)


def _is_wrapper(frame: Frame) -> bool:
    """Decorators' inner functions (`_exception_logger.<locals>.wrapper`, `prof.<locals>.wrap.<locals>.wrapper`)."""
    return "<locals>" in frame.function


def _imported(frames: list[Frame], frame: Frame) -> bool:
    """Whether `frame` runs because its caller imports it (importlib's frames call it), not as the program itself."""
    index = next(i for i, candidate in enumerate(frames) if candidate is frame)
    return index > 0 and frames[index - 1].file.startswith("<frozen importlib")


def _display_name(frame: Frame, imported: bool = False) -> str:
    """`DistributedDataParallel.__init__` -> `DistributedDataParallel`; a module's top level -> its dotted name,
    `import torch` when it runs because something imports it."""
    if frame.function == "<module>":
        module = (frame.short_file or frame.file).removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        return f"import {module}" if imported else module
    return frame.function.removesuffix(".__init__")


def _known_wait(frame: Frame, env: dict[str, str]) -> str | None:
    """What a torch frame known to block waits for, with the peer's address where its locals give it."""
    name = frame.function
    if name == "_create_c10d_store":
        address = f"{frame.value('hostname') or env.get('MASTER_ADDR', '?')}:{frame.value('port') or env.get('MASTER_PORT', '?')}"
        if frame.value("start_daemon") == "True":
            return f"TCPStore server {address} waiting for {frame.value('world_size') or 'all'} ranks to connect"
        return f"TCPStore connect {address}"
    if name == "_new_process_group_helper":
        return f"{frame.value('backend_str') or frame.value('backend') or 'backend'} connecting to the other ranks"
    if name == "_store_based_barrier":
        return "store barrier: waiting for the other ranks"
    if name.endswith(".next_rendezvous"):
        return "rendezvous: waiting for the other nodes"
    if name.endswith("ElasticAgent._invoke_run"):
        return "monitoring its workers"
    if name.endswith("ProcessContext.join"):
        return "waiting for its spawned processes"
    return None


def _in_distributed_code(frames: list[Frame]) -> bool:
    return any((frame.short_file or frame.file).startswith(DISTRIBUTED_PACKAGES) for frame in frames)


def frames_from_py_spy(frames: list[dict]) -> list[Frame]:
    """py-spy's JSON frames (innermost first) as Frames, innermost last; torch frames keep their locals."""
    converted = []
    for data in reversed(frames):
        frame = Frame(str(data.get("name")), str(data.get("filename")), int(data.get("line") or 0),
                      str(data.get("short_filename") or ""))
        if frame.in_torch and data.get("locals"):
            frame = Frame(frame.function, frame.file, frame.line, frame.short_file,
                          {str(item["name"]): str(item.get("repr")) for item in data["locals"]})
        converted.append(frame)
    return converted


def threads_from_py_spy(dump: list[dict]) -> list[ThreadStack]:
    """py-spy's `dump --json` of one process as ThreadStacks (main thread first)."""
    def name(thread: dict) -> str:  # py-spy names threads from `threading`; a program that never imported it has one
        return thread.get("thread_name") or (MAIN_THREAD if len(dump) == 1 else f"thread {thread.get('os_thread_id')}")

    threads = [ThreadStack(name(thread), int(thread.get("os_thread_id") or thread.get("thread_id") or 0),
                           bool(thread.get("active")), frames_from_py_spy(thread.get("frames") or [])) for thread in dump]
    return sorted(threads, key=lambda thread: thread.name != MAIN_THREAD)


def is_agent(cmdline: list[str]) -> bool:
    """torchrun's agent: `torchrun ...`, `python -m torch.distributed.run|launch ...`."""
    if any(Path(arg).name == "torchrun" for arg in cmdline[:2]):
        return True
    return any(flag == "-m" and module in AGENT_MODULES for flag, module in zip(cmdline, cmdline[1:]))


def process_stack(process: JobProcess, dump: list | str, node_processes: list[JobProcess]) -> ProcessStack:
    """Place one process: agent, worker of a rank (from RANK/LOCAL_RANK, its stack, or lab exec's NODE_RANK), other."""
    threads = threads_from_py_spy(dump) if isinstance(dump, list) else []
    env = process.env
    rank = _int(env.get("RANK"))
    local_rank = _int(env.get("LOCAL_RANK"))
    frames = [frame for thread in threads for frame in thread.frames]
    if rank is None:
        rank = next((value for frame in frames if frame.function in ("init_process_group", "_create_c10d_store")
                     if (value := _int(frame.value("rank"))) is not None and value >= 0), None)
    if local_rank is None:  # torch.multiprocessing.spawn passes each process its index
        local_rank = next((_int(frame.value("i")) for frame in frames
                           if frame.function == "_wrap" and frame.short_file == "torch/multiprocessing/spawn.py"), None)
    agent = is_agent(process.cmdline)
    if _child_of_its_rank(process, node_processes):
        rank = local_rank = None  # a DataLoader worker or a subprocess: its parent's RANK, not a rank of its own
    if rank is None and not agent and _sole_process_of_node(process, node_processes, env):
        rank = _int(env.get("NODE_RANK"))  # `lab exec`: one process per node, rank = node rank
    role = "agent" if agent else "worker" if rank is not None or local_rank is not None else "process"
    return ProcessStack(
        node=process.node, pid=process.pid, role=role, rank=rank, local_rank=local_rank,
        env={key: value for key, value in env.items() if key in STACK_ENV or key.startswith(STACK_ENV_PREFIXES)},
        threads=threads, run_id=env.get("LAB_RUN_ID", ""), ppid=process.ppid, cmdline=process.cmdline,
        error=dump if isinstance(dump, str) else None)


def _child_of_its_rank(process: JobProcess, node_processes: list[JobProcess]) -> bool:
    """A process started by a rank's worker that inherited the worker's RANK (not torchrun's agent starting workers)."""
    parent = next((other for other in node_processes if other.pid == process.ppid), None)
    return (parent is not None and not is_agent(parent.cmdline) and "RANK" in process.env
            and parent.env.get("RANK") == process.env.get("RANK"))


def _sole_process_of_node(process: JobProcess, node_processes: list[JobProcess], env: dict[str, str]) -> bool:
    """A top-level process of its run with no processes of its own, on a node that runs one process per node."""
    same_run = [other for other in node_processes if other.env.get("LAB_RUN_ID") == env.get("LAB_RUN_ID")]
    pids = {other.pid for other in same_run}
    return (process.ppid not in pids and not any(other.ppid == process.pid for other in same_run)
            and env.get("NPROC_PER_NODE", "1") == "1")


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def capture_stacks(transport: Transport, run_id: str, dest_dir: Path | None, nodes: Iterable[int]) -> list[ProcessStack]:
    """Stacks of every process of `run_id` ('' = every run) on `nodes`; written to `dest_dir` (a record's stacks/).

    Never raises for a node it cannot read: that node gets one ProcessStack with pid None and the reason in `error`.
    """
    stacks: list[ProcessStack] = []
    for index in nodes:
        try:
            found = transport.processes(index, run_id)
            dumps = transport.dump_stacks(index, [process.pid for process in found]) if found else {}
        except StacksUnavailable as error:
            stacks.append(ProcessStack(index, None, "process", None, None, {}, error=str(error)))
            continue
        stacks += [process_stack(process, dumps.get(process.pid, "no stack came back"), found) for process in found]
    stacks.sort(key=lambda stack: (stack.role != "worker", stack.rank if stack.rank is not None else 1 << 30,
                                   stack.node, stack.pid or 0))
    if dest_dir is not None:
        write_stacks(stacks, run_id, dest_dir)
    return stacks


def write_stacks(stacks: list[ProcessStack], run_id: str, dest_dir: Path) -> None:
    """<node>-<pid>.txt per process, stacks.json and summary.txt (replacing an earlier capture's)."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    for old in dest_dir.glob("node*-*.txt"):
        old.unlink()
    for stack in stacks:
        if stack.pid is not None:
            (dest_dir / f"node{stack.node}-{stack.pid}.txt").write_text(stack.text())
    captured = {"run_id": run_id, "captured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "processes": [stack.to_dict() for stack in stacks]}
    (dest_dir / "stacks.json").write_text(json.dumps(captured, indent=2) + "\n")
    (dest_dir / "summary.txt").write_text("".join(stack.summary() + "\n" for stack in stacks))


def record_dir(process_run_id: str) -> Path | None:
    """The record folder of the run a LAB_RUN_ID belongs to ('<run>' or '<run>-<step>'); None when not kept here."""
    candidate = process_run_id
    while candidate:
        if (paths.runs_dir() / candidate).is_dir():
            return paths.runs_dir() / candidate
        candidate = candidate.rpartition("-")[0]
    return None


def save_by_run(stacks: list[ProcessStack]) -> dict[str, Path]:
    """Write each run's stacks into its own record (`stacks/`); nodes that could not be read go to every one.

    Returns each LAB_RUN_ID with a record here -> the stacks folder its processes were written to.
    """
    unreadable = [stack for stack in stacks if stack.pid is None]
    folders = {run_id: record_dir(run_id) for run_id in {stack.run_id for stack in stacks if stack.pid is not None}}
    saved = {}
    for folder in set(folders.values()) - {None}:
        write_stacks([stack for stack in stacks if stack.pid is not None and folders[stack.run_id] == folder]
                     + unreadable, folder.name, folder / "stacks")
        saved.update({run_id: folder / "stacks" for run_id, found in folders.items() if found == folder})
    return saved


# faulthandler's words: a thread's header, then its frames, most recent call first.
FAULTHANDLER_THREAD = re.compile(r"^(?:Current thread|Thread) (?P<ident>0x[0-9a-f]+) \(most recent call first\):")
FAULTHANDLER_FRAME = re.compile(r'^\s+File "(?P<file>[^"]*)", line (?P<line>\d+) in (?P<function>\S+)')
LIBRARY_PREFIX = re.compile(r"^.*/(?:site|dist)-packages/")


def stacks_at_termination(folder: Path) -> list[ProcessStack]:
    """The stacks torchrun's workers wrote as it ended them with SIGTERM (the jobs' sitecustomize, `term-*.txt`: a JSON
    line saying who, then faulthandler's dump); files of processes that got no SIGTERM hold the first line only."""
    found = []
    for path in sorted(folder.glob("term-*.txt")) if folder.is_dir() else []:
        try:
            head, _, dump = path.read_text(errors="replace").partition("\n")
            who = json.loads(head)
        except (OSError, ValueError):
            continue
        threads, frames, ident = [], [], None
        for text in dump.splitlines() + [""]:
            if (header := FAULTHANDLER_THREAD.match(text)) or not text.strip():
                if ident is not None and frames:
                    name = MAIN_THREAD if ident == who.get("main_thread") else f"thread {ident}"
                    threads.append(ThreadStack(name, int(ident, 16), name == MAIN_THREAD, frames[::-1]))
                ident, frames = (header["ident"] if header else None), []
            elif (frame := FAULTHANDLER_FRAME.match(text)) and ident is not None:
                short = LIBRARY_PREFIX.sub("", frame["file"]) if LIBRARY_PREFIX.match(frame["file"]) else ""
                frames.append(Frame(frame["function"], frame["file"], int(frame["line"]), short))
        node, rank = _int(who.get("node")), _int(who.get("rank"))
        if not threads or node is None:
            continue
        found.append(ProcessStack(node, _int(str(who.get("pid"))), "worker", rank, _int(who.get("local_rank")),
                                  {key: str(who[key.lower()]) for key in ("RANK", "LOCAL_RANK") if who.get(key.lower())},
                                  sorted(threads, key=lambda thread: thread.name != MAIN_THREAD),
                                  cmdline=[str(arg) for arg in who.get("argv") or []], at_sigterm=True))
    return found


def load_stacks(dest_dir: Path) -> list[ProcessStack]:
    """The ProcessStacks a capture wrote to `dest_dir` (empty when none was taken)."""
    path = dest_dir / "stacks.json"
    if not path.is_file():
        return []
    return [ProcessStack.from_dict(data) for data in json.loads(path.read_text()).get("processes", [])]
