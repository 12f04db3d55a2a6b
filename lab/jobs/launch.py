"""Start one command per node through a transport, stream their output, wait, and stop them all at a timeout.

Every run goes through `launch()`: exercise steps (runner.py) and the user's own commands (adhoc.py).
A run whose answer is known stops early: when every process of some node has failed while others wait,
they would wait until the timeout for a peer that is gone. Before a hung run is stopped, every process writes its
Flight Recorder (flight.py) and its stack is captured (stacks.py), so the record says where each rank waited and
which collectives it had run.
"""

from __future__ import annotations

import queue
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from lab.analysis.flight import FLIGHT_FOLDER, RankTrace, load_traces
from lab.analysis.stacks import ProcessStack, capture_stacks, stacks_at_termination, write_stacks
from lab.jobs.flight import recording_for
from lab.jobs.transports import Transport, pump

POLL_SECONDS = 0.2
GRACE_SECONDS = 15  # after the lab killed a run, how long a node's stream may take to end
FAILED_NODE_GRACE = 10.0  # default `--fail-grace`: how long the others may go on once every process of a node failed
# torchrun's last word when its workers failed for good; its agent can then hang in shutdown instead of exiting.
TORCHRUN_GAVE_UP = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"


class Reporter(Protocol):
    def line(self, node: int, text: str) -> None: ...
    def event(self, text: str) -> None: ...


@dataclass
class LaunchResult:
    exit_codes: dict[int, int | None]
    logs: dict[int, str]
    timed_out: bool
    seconds: float
    oom_killed: list[int] = field(default_factory=list)
    stopped: str = ""  # why the lab stopped the run before its timeout ('' when it did not)
    stacks: list[ProcessStack] = field(default_factory=list)  # captured before a hung run was stopped
    started_at: float = 0.0  # wall clock (time.time()) when the first node's command was started
    node_exits: dict[int, float] = field(default_factory=dict)  # node -> wall clock when its command ended
    stopped_at: float | None = None  # wall clock when the lab stopped the run (timeout or early stop)
    hand_faults: list[tuple[float, int, str]] = field(default_factory=list)  # `lab fault` while it ran: (when, node, action)
    traces: list[RankTrace] = field(default_factory=list)  # each process's Flight Recorder, as it ended or was stopped


OOM_READERS = 16  # nodes whose OOM counters are read at once (each read is one exec in the node)


def oom_counts(transport: Transport, nodes: list[int]) -> dict[int, int | None]:
    """Each node's OOM kills so far, read from every node at once (a launch reads them before and after)."""
    if not nodes:
        return {}
    with ThreadPoolExecutor(max_workers=min(OOM_READERS, len(nodes))) as pool:
        return dict(zip(nodes, pool.map(transport.oom_kills, nodes)))


def launch(transport: Transport, commands: dict[int, tuple[list[str], dict[str, str]]], process_run_id: str,
           timeout: float, reporter: Reporter, on_timeout: Callable[[dict], None] | None = None,
           watch: Callable[[], None] | None = None, cwd: str | None = None,
           fail_grace: float | None = FAILED_NODE_GRACE, expendable: frozenset[int] = frozenset(),
           stacks_dir: Path | None = None, profile_dir: Path | None = None) -> LaunchResult:
    """Start one command per node, stream their output, and wait; kill everything at the timeout.

    `watch` is called while waiting (fault injection); `on_timeout` gets the exit codes seen so far.
    Once every process of a node has exited non-zero while other nodes still run, the run is stopped
    `fail_grace` seconds later (None or 0: wait for the timeout); nodes in `expendable` (taken away by a
    fault on purpose) do not count. Before a timeout or such a stop kills anything, the stacks of every
    process are captured into `stacks_dir`. A node whose stream never ends (paused container, lost
    engine) is given up GRACE_SECONDS after the kill. With `profile_dir` (and a folder shared with the nodes), every
    process profiles a few steady steps for `lab forecast` and the profiles land there.
    """
    events: queue.Queue = queue.Queue()
    logs: dict[int, list[str]] = {index: [] for index in commands}
    exit_codes: dict[int, int | None] = {}
    oom_before = oom_counts(transport, list(commands))
    started = time.monotonic()
    started_at = time.time()
    node_exits: dict[int, float] = {}

    def wall(moment: float) -> float:
        """A monotonic moment of this launch as wall-clock time, for timelines that meet the ranks' own clocks."""
        return started_at + (moment - started)

    timed_out, stopped, stopped_at, first_failure = False, "", None, None
    stacks: list[ProcessStack] = []
    killed_by_lab: set[int] = set()  # nodes still running when the lab stopped the run: their status is the lab's kill
    gave_up: set[int] = set()  # nodes whose torchrun reported its workers failed, whether or not it has exited

    flight = recording_for(transport, process_run_id) if stacks_dir is not None else None

    def stop_all(reason: str) -> None:
        """Capture where every process waits and its last collectives, then kill every process of the run."""
        nonlocal stopped_at
        stopped_at = time.monotonic()
        killed_by_lab.update(index for index in commands if index not in exit_codes)
        if flight is not None:
            flight.dump_live()
        if stacks_dir is not None:
            stacks.extend(capture_stacks(transport, process_run_id, stacks_dir, list(commands)))
            for stack in stacks:
                if stack.role != "agent":
                    reporter.event(f"stack: {stack.summary()}")
        for index in commands:
            transport.kill(index, process_run_id, "all")
        if reason:
            reporter.event(reason)

    try:
        for index, (argv, env) in commands.items():
            env = flight.env(env, profile_dir is not None) if flight is not None else env
            process = transport.start(index, argv, {**env, "LAB_RUN_ID": process_run_id}, cwd)
            pump(process, lambda text, i=index: events.put(("line", i, text)),
                 lambda code, i=index: events.put(("exit", i, code)))
        while len(exit_codes) < len(commands):
            try:
                kind, index, payload = events.get(timeout=POLL_SECONDS)
                if kind == "line":
                    logs[index].append(payload)
                    reporter.line(index, payload)
                    if TORCHRUN_GAVE_UP in payload:
                        gave_up.add(index)
                else:
                    exit_codes[index] = payload
                    node_exits[index] = wall(time.monotonic())
            except queue.Empty:
                pass
            if watch:
                watch()
            now = time.monotonic()
            if stopped_at is None and now - started > timeout:
                timed_out = True
                if on_timeout:
                    on_timeout(dict(exit_codes))
                stop_all("")
            if stopped_at is None and fail_grace:
                failed = sorted(set(failed_nodes(exit_codes, expendable)) | (gave_up - expendable))
                waiting = [index for index in commands if index not in exit_codes]
                first_failure = (first_failure or now) if failed and waiting else None
                if first_failure is not None and now - first_failure >= fail_grace:
                    how = {i: f"exit {exit_codes[i]}" if i in exit_codes else "torchrun gave up" for i in failed}
                    stopped = (f"{', '.join(f'node{i} ({how[i]})' for i in failed)} failed while "
                               f"{', '.join(f'node{i}' for i in waiting)} kept running: stopped the run "
                               f"{fail_grace:g} s later instead of at the {timeout:g} s timeout")
                    stop_all(stopped)
            if stopped_at is not None and now - stopped_at > GRACE_SECONDS:
                for index in commands:
                    exit_codes.setdefault(index, None)
                    node_exits.setdefault(index, wall(now))
    except BaseException:  # Ctrl-C, a node refusing to start: nothing of this launch may outlive it, on any node
        for index in commands:
            transport.kill(index, process_run_id, "all")
        raise
    finally:
        if flight is not None:  # a run that ended well by itself keeps no recorders
            if profile_dir is not None:
                flight.keep_profiles(profile_dir)
            ended_well = (stopped_at is None and len(exit_codes) == len(commands)
                          and all(code == 0 for code in exit_codes.values()))
            flight.keep(None if ended_well else stacks_dir / FLIGHT_FOLDER)
            stacks = with_stacks_at_termination(stacks, stacks_dir, process_run_id)
    if any(code != 0 for code in exit_codes.values()):  # cut off or killed: was it the engine, or the lab taken down?
        transport.check_alive()
    exit_codes.update({index: None for index in killed_by_lab})
    oom_after = oom_counts(transport, [index for index, before in oom_before.items() if before is not None])
    oom_killed = [index for index, after in oom_after.items() if (after or 0) > oom_before[index]]
    for index in oom_killed:
        reporter.event(f"node{index}: a process was killed by the kernel for exceeding the node's memory limit (OOM)")
    return LaunchResult(exit_codes, {i: "\n".join(lines) for i, lines in logs.items()}, timed_out,
                        time.monotonic() - started, oom_killed, stopped, stacks, started_at, node_exits,
                        wall(stopped_at) if stopped_at is not None else None,
                        transport.faults_set_by_hand(started_at, time.time()),
                        load_traces(stacks_dir / FLIGHT_FOLDER) if stacks_dir is not None else [])


def with_stacks_at_termination(stacks: list[ProcessStack], stacks_dir: Path, run_id: str) -> list[ProcessStack]:
    """The stacks the lab took, plus those of ranks that torchrun ended with SIGTERM before the lab could look (they
    wrote their own as the signal came), written into the record beside them."""
    taken = {(stack.node, stack.rank) for stack in stacks if stack.rank is not None and stack.pid is not None}
    ended = [stack for stack in stacks_at_termination(stacks_dir / FLIGHT_FOLDER) if (stack.node, stack.rank) not in taken]
    if not ended:
        return stacks
    write_stacks(stacks + ended, run_id, stacks_dir)
    return stacks + ended


def failed_nodes(exit_codes: dict[int, int | None], expendable: frozenset[int] = frozenset()) -> list[int]:
    """Nodes whose command exited by itself with a non-zero status (None: the lab killed it; not a failure of its own)."""
    return [index for index, code in sorted(exit_codes.items()) if code not in (0, None) and index not in expendable]
