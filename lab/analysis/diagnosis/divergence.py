"""Causes that appear only across nodes: the ranks disagree about what they do (the world they expect, the
rank they claim, when they arrive, how many collectives they run, with what tensors, on which model).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone

from lab.analysis.diagnosis.addresses import connect_attempts
from lab.analysis.diagnosis.context import (ARGUMENT_ERRORS, JOINED, STORE_WAIT, Context, PatternRule, echoes_a_peer, env_values,
                                            job_lines, missing_rank, near, node_evidence, node_of_rank, quote,
                                            rendezvous_host)
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.logs import LIBRARY_FILE, TRACEBACK_FRAME, LogLine, collective_in, last_own_line
from lab.analysis.diagnosis.nodes import RENDEZVOUS_CALLS
from lab.analysis.diagnosis.sources import (RANK_NAMES, call_name, caller_place, calls_named, collective_at,
                                            conditions_above, identifier, kept_by_a_local_test, made_of, parsed_files,
                                            source_named, walk)
from lab.analysis.diagnosis import waits
from lab.analysis.diagnosis.waits import DTYPE_BYTES
from lab.analysis.stacks import FAULTHANDLER_FRAME, Frame, ProcessStack


# Signs that a node's launched process started processes of its own (torch.multiprocessing.spawn's messages, and
# each process's own connection to the store timing out).
SPAWNED_INDEX = re.compile(r"-- Process (?P<index>\d+) terminated with|\bprocess (?P<other>\d+) terminated with "
                           r"(?:exit code|signal)")
SPAWN_TERMINATING = re.compile(r"multiprocessing/spawn\.py:\d+\] Terminating process (?P<pid>\d+)")
STORE_CLIENT_WAIT = re.compile(r"waitForInput: socket SocketImpl\(fd=\d+, addr=\[[^\]]*\]:(?P<port>\d+), remote=")


def spawned_per_node(ctx: Context) -> int:
    """How many processes joining the group one node ran, where its log shows more than the lab launched there (a
    script that starts its own workers: mp.spawn, multiprocessing); 0 when nothing says so."""
    most = 0
    for node in {line.node for line in ctx.lines}:
        indices, pids, ports = set(), set(), set()
        for line in ctx.lines:
            if line.node != node:
                continue
            if match := SPAWNED_INDEX.search(line.text):
                indices.add(int(match["index"] or match["other"]))
            elif match := SPAWN_TERMINATING.search(line.text):
                pids.add(match["pid"])
            elif match := STORE_CLIENT_WAIT.search(line.text):
                ports.add(match["port"])
        most = max(most, len(indices) + len(pids), max(indices, default=-1) + 1, len(ports))
    return most


def processes_started(ctx: Context) -> int:
    """The processes the run had: those the lab launched, or more where the nodes' processes spawned their own (or
    the ranks they claimed say so: a launcher of the job's own that starts several per node)."""
    claimed = [trace.rank for trace in ctx.evidence.traces if trace.rank is not None] + [
        process.rank for process in ctx.evidence.processes if process.rank is not None]
    return max(ctx.evidence.expected_world_size, spawned_per_node(ctx) * ctx.evidence.nnodes, max(claimed, default=-1) + 1)


def _world_sizes_per_node(ctx: Context) -> str | None:
    """'node0 2, node1 1' when the world sizes the processes passed to init_process_group differ by node."""
    sizes = {}
    for trace in ctx.evidence.traces:
        if trace.node is not None and trace.world_size:
            sizes.setdefault(trace.node, set()).add(int(trace.world_size))
    if len({size for found in sizes.values() for size in found}) < 2:
        return None
    return ", ".join(f"node{node} " + "/".join(map(str, sorted(found))) for node, found in sorted(sizes.items()))


RANK_OUTSIDE_WORLD = re.compile(r"rank < size\. (?P<rank>\d+) vs (?P<size>\d+)|Invalid rank (?P<rank2>\d+), world size "
                                r"(?P<size2>\d+)|rank \(\d+\) (?:must be|should be) (?:smaller|less) than world")


def world_size_findings(ctx: Context) -> list[Finding]:
    """The world the job asked for against the one the lab launched: from the store's messages, else (a hang
    that outlived the lab's timeout) from what each process passed to init_process_group."""
    launched = processes_started(ctx)
    had = "the lab launched" if launched == ctx.evidence.expected_world_size else "the run started"
    found = []
    for line in ctx.lines:
        if outside := RANK_OUTSIDE_WORLD.search(line.text):
            size = outside["size"] or outside["size2"]
            if differs := _world_sizes_per_node(ctx):
                found.append(Finding(
                    "world-size-mismatch", f"the nodes pass different world sizes to init_process_group ({differs}): "
                    f"a process claims rank {outside['rank'] or outside['rank2'] or '?'} in a world of {size or '?'}",
                    quote(line), line.node, line.rank,
                    f"give every node the same world size ({launched}): whatever sets it differs between the nodes (a "
                    "variable exported in one node's shell or profile, a per-node config); under `lab exec` pass "
                    "{world_size} or NNODES, the same everywhere"))
                continue
            found.append(Finding(
                "world-size-mismatch", f"a process claims rank {outside['rank'] or outside['rank2'] or '?'} in a world "
                                       f"of {size or '?'}: the job passes a world size smaller than the {launched} "
                                       f"process(es) {had}", quote(line), line.node, line.rank,
                f"pass world_size={launched}: read WORLD_SIZE from the environment (torchrun sets it; LOCAL_WORLD_SIZE "
                "is the processes of one node only), or let init_method='env://' read it"))
        elif match := JOINED.search(line.text):
            joined, size = int(match["joined"]), int(match["size"])
            if size != launched:
                found.append(Finding(
                    "world-size-mismatch",
                    f"the job expects a world size of {size} but {had} {launched} process(es)",
                    quote(line), line.node, line.rank,
                    f"pass world_size={launched} (or read WORLD_SIZE from the environment instead of hard-coding it); "
                    "or launch as many processes as the job expects (--nproc-per-node / nodes)"))
            elif joined < size:
                found.append(Finding(
                    "ranks-missing", f"only {joined} of {size} ranks reached the rendezvous", quote(line),
                    line.node, line.rank,
                    "look at the ranks that never joined (their node's log): they failed before init_process_group "
                    "or could not reach MASTER_ADDR:MASTER_PORT"))
        elif (wait := STORE_WAIT.search(line.text)) and missing_rank(wait["keys"]) >= launched:
            found.append(Finding(
                "world-size-mismatch", f"the job waits for rank {missing_rank(wait['keys'])}, but {had} "
                                       f"{launched} process(es) (ranks 0..{launched - 1})", quote(line), line.node,
                line.rank, f"pass world_size={launched} (or read WORLD_SIZE from the environment instead of "
                           "hard-coding it); or launch as many processes as the job expects"))
        elif wait:
            found.append(Finding(
                "ranks-missing", "a rank waited for others that never arrived", quote(line), line.node, line.rank,
                "look at the ranks that never arrived: they crashed, hang before this point, or dialled another "
                "address or port"))
    return found or _world_asked_in_stacks(ctx)


def _world_asked_in_stacks(ctx: Context) -> list[Finding]:
    """Processes that wait in init_process_group for more ranks than exist: their own world_size argument (one more
    than launched, a hard-coded count) is larger than the processes the run has."""
    calls = [call for call in init_calls(ctx) if call.world_size is not None]
    asked = max((call.world_size for call in calls), default=0)
    launched = ctx.evidence.expected_world_size
    if not calls or asked <= len(calls) or asked == launched:
        return []  # as many processes as asked (e.g. spawned per node), or ranks missing for another reason
    first = next(call for call in calls if call.world_size == asked)
    return [Finding(
        "world-size-mismatch", f"the job passes world_size={asked} to init_process_group, but the lab launched "
                               f"{launched} process(es): it waits for ranks that do not exist",
        "; ".join(str(call) for call in calls), first.process.node, first.rank,
        f"pass world_size={launched}, or better read it from the environment (int(os.environ['WORLD_SIZE']); "
        "init_method='env://' reads it by itself) instead of a count of your own; or launch as many processes "
        "as the job asks for")]


def _loader_worker(process) -> bool:
    """A DataLoader's worker process: forked from its rank on purpose, it runs no collective (a DistributedSampler's
    __iter__ in its stack is reading indices, not communicating)."""
    return any(frame.function == "_worker_loop" and frame.file.endswith("data/_utils/worker.py")
               for thread in process.threads for frame in thread.frames)


def inherited_rank_findings(ctx: Context) -> list[Finding]:
    """A child of a rank's worker (subprocess, os.system, multiprocessing) that inherited the job's RANK and MASTER_*
    and is itself in torch.distributed: it joins the job's rendezvous as a second process of its parent's rank."""
    workers = {(process.node, process.pid): process for process in ctx.evidence.processes
               if process.role == "worker" and process.pid is not None}
    for process in ctx.evidence.processes:
        parent = workers.get((process.node, process.ppid))
        if process.role == "worker" or parent is None or process.env.get("RANK") != parent.env.get("RANK"):
            continue
        waiting = process.waiting()
        if waiting is None or not waiting.in_distributed_call or _loader_worker(process):
            continue
        started = (parent.waiting().user_frame.location if parent.waiting() and parent.waiting().user_frame
                   else "its code")
        if process.cmdline == parent.cmdline and waiting.call not in RENDEZVOUS_CALLS:  # forked, not a new program
            return [Finding(
                "duplicate-rank", f"a forked child of rank {parent.rank} (pid {process.pid}, started at {started}: a "
                f"multiprocessing Pool or Process with the fork start method) runs {waiting.call} on the copy of "
                f"rank {parent.rank}'s process group it inherited: a fork copies the group's connections but not the "
                "threads that drive them, so the collective never completes (and the peers may get stray bytes on "
                "sockets the parent also uses)",
                f"node{process.node} pid {process.pid} (parent pid {process.ppid}, rank {parent.rank}): the same "
                "program as its parent", process.node, parent.rank,
                "run collectives in the rank itself: let the workers compute and return their values (pool.map), then "
                "all_reduce once in the parent; a helper that needs a process group of its own must be spawned "
                "(start method 'spawn') into a world of its own")]
        return [Finding(
            "duplicate-rank", f"a child process of rank {parent.rank} (pid {process.pid}, started at {started}) "
            f"inherited the job's RANK={process.env.get('RANK')}, WORLD_SIZE and MASTER_ADDR/PORT and is in "
            f"{waiting.call} itself: it joins the job's rendezvous as a second rank {parent.rank}",
            f"node{process.node} pid {process.pid} (parent pid {process.ppid}, rank {parent.rank}): "
            + " ".join(process.cmdline)[:200], process.node, parent.rank,
            "keep torch.distributed out of helper processes (compute there, reduce in the parent), or start them with "
            "an environment of their own: env={k: v for k, v in os.environ.items() if k not in ('RANK', 'WORLD_SIZE', "
            "'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT') and not k.startswith('TORCHELASTIC_')}, and their own "
            "port and world if they need a group")]
    return []


def _world_joined(ctx: Context) -> bool:
    """Every rank of the world went on past init_process_group (the hooks saw it make later calls): the world's
    rendezvous was complete, so its later store waits (a subgroup's) are no rank claimed twice."""
    joined = [trace for trace in ctx.evidence.traces if trace.calls and any(
        call.op == "init_process_group" for call in trace.calls.made[:-1])]
    return len({trace.rank for trace in joined}) >= max(2, ctx.evidence.expected_world_size)


def duplicate_rank_findings(ctx: Context) -> list[Finding]:
    """Every launched process waited in gloo's rendezvous for a rank inside the world (gloo's keys end in the rank
    awaited): none is missing, none crashed, yet that rank never came, so two processes claimed one rank (LOCAL_RANK
    used as the rank, or the same node rank given on two nodes)."""
    waiting: dict[tuple[int, int | None], tuple[LogLine, int]] = {}
    started = processes_started(ctx)
    for line in ctx.lines:
        wait = STORE_WAIT.search(line.text)
        awaited = missing_rank(wait["keys"]) if wait else -1
        if 0 <= awaited < started:
            waiting.setdefault((line.node, line.rank), (line, awaited))
    if len(waiting) < max(2, ctx.evidence.expected_world_size) or _world_joined(ctx):
        return _claimed_twice(ctx)
    line, awaited = next(iter(waiting.values()))
    nodes = ", ".join(f"node{node}" for node in sorted({node for node, _ in waiting}))
    count = started if started > ctx.evidence.expected_world_size else len(waiting)  # spawned: more than lines say
    return [Finding(
        "duplicate-rank", f"all {count} processes ({nodes}) reached the rendezvous, yet rank {awaited} never "
                          "did: two of them claim the same rank", quote(line), line.node, line.rank,
        _own_rank_fix(ctx))]


# gloo's and NCCL's words for a collective that waited past the process group's timeout.
COLLECTIVE_TIMEOUT = re.compile(r"[Tt]imed out waiting|[Tt]imeout|timed out|failed to pass monitoredBarrier",
                                re.IGNORECASE)


def _claimed_twice(ctx: Context) -> list[Finding]:
    """From the stacks of a hang: two processes passed the same rank to init_process_group."""
    claims: dict[int, list[InitCall]] = {}
    for call in init_calls(ctx):
        if call.rank is not None:
            claims.setdefault(call.rank, []).append(call)
    for rank, calls in sorted(claims.items()):
        if len(calls) > 1:
            nodes = ", ".join(f"node{call.process.node}" for call in calls)
            return [Finding("duplicate-rank", f"{len(calls)} processes ({nodes}) passed rank {rank} to "
                                              "init_process_group: they claim the same rank",
                            "; ".join(str(call) for call in calls), calls[0].process.node, rank, _own_rank_fix(ctx))]
    # the hooks' records, where no stacks were taken: processes still in init_process_group under one rank (the
    # first to time out ends its siblings, mp.spawn's way, before they print their own wait)
    holders: dict[int, set[tuple[int, int]]] = {}
    for trace in ctx.evidence.traces:
        if trace.rank is not None and trace.node is not None and trace.calls and any(
                call.op == "init_process_group" for call in (*trace.calls.pending, *trace.calls.failed)):
            holders.setdefault(trace.rank, set()).add((trace.node, trace.pid))
    for rank, processes in sorted(holders.items()):
        if len(processes) > 1:
            nodes = ", ".join(f"node{node}" for node in sorted({node for node, _ in processes}))
            waited = next((line for line in ctx.lines if STORE_WAIT.search(line.text)), None)
            first = min(processes)
            return [Finding(
                "duplicate-rank", f"{len(processes)} processes ({nodes}) passed rank {rank} to init_process_group and "
                "were still in it when the run ended: they claim the same rank",
                quote(waited) if waited else "; ".join(f"node{node} pid {pid}: rank {rank} in init_process_group"
                                                       for node, pid in sorted(processes)),
                first[0], rank, _own_rank_fix(ctx))]
    return []


def _own_rank_fix(ctx: Context) -> str:
    if ctx.evidence.nproc_per_node == 1 and spawned_per_node(ctx) > 1:
        return ("each node's processes (started by the script: mp.spawn, multiprocessing) take ranks 0..K-1 on every "
                "node: give each its global rank, node_rank * K + index (lab exec sets NODE_RANK and NNODES), with "
                "world_size = NNODES * K; a script that does so already got the same node rank on every node (an "
                "argument left at its default: pass --node-rank {node_rank})")
    torchrun = (bool(ctx.reports) or any("torch/distributed/run.py" in other.text for other in ctx.lines)
                or any(process.role == "agent" or "TORCHELASTIC_RUN_ID" in process.env
                       for process in ctx.evidence.processes))
    if torchrun:
        return ("give every process its own global rank: under torchrun pass RANK (int(os.environ['RANK'])), not "
                "LOCAL_RANK, which starts at 0 on every node")
    return ("give every process its own global rank: node_rank * processes_per_node + local_rank, with a different "
            "node rank on each node (lab exec fills {node_rank} and {rank} per node)")


@dataclass(frozen=True)
class InitCall:
    """What one process of a hung run passed to init_process_group, read from its stack's locals."""
    process: ProcessStack
    rank: int | None
    world_size: int | None
    caller: Frame | None  # the user's line that called it

    def __str__(self) -> str:
        at = f" at {self.caller.location}" if self.caller else ""
        return (f"node{self.process.node} pid {self.process.pid}: init_process_group(rank={self.rank}, "
                f"world_size={self.world_size}){at}")


def init_calls(ctx: Context) -> list[InitCall]:
    """Every process (not torchrun's agent) whose stack stands in init_process_group, with the rank and world size
    it passed (its locals: the values after the environment's rendezvous filled them in)."""
    calls = []
    for process in ctx.evidence.processes:
        if process.role == "agent":
            continue
        for thread in process.threads:
            frame = next((frame for frame in reversed(thread.frames)
                          if frame.function == "init_process_group" and frame.in_torch), None)
            if frame:
                where = process.waiting()
                calls.append(InitCall(process, _number(frame.value("rank")), _number(frame.value("world_size")),
                                      where.user_frame if where else None))
                break
    return calls


def _number(text: str | None) -> int | None:
    return int(text) if text and text.lstrip("-").isdigit() and int(text) >= 0 else None


LATE_TO_JOIN_FIX = ("join the process group before slow start-up work (or do that work after init_process_group), or "
                    "give init_process_group a timeout longer than the slowest rank's start "
                    "(timeout=datetime.timedelta(...); torchrun: --rdzv-conf join_timeout=...)")
LATE_IN_A_COLLECTIVE_FIX = (
    "give every rank the same work between collectives, or make the slow part (loading, a checkpoint, an evaluation "
    "on one rank) shorter than the process group's timeout: a longer timeout= for init_process_group, prefetching "
    "data, or every rank waiting at a barrier for the slow one")


def _users_own_key(ctx: Context, gave_up) -> str | None:
    """The key of a store wait that timed out, when the job's own code waited for it (the hooks saw the wait): not
    the rendezvous's keys, which torch waits for."""
    found = STORE_WAIT.search(gave_up.text)
    keys = (found["keys"] or "").strip("/") if found else ""
    users = {key.strip("/") for trace in ctx.evidence.traces if trace.calls
             for op in trace.calls.store if op.waits for key in op.keys}
    return keys if keys and keys in users else None


# Where a thread that is not computing waits, by the standard library's file it stands in (innermost first).
BLOCKING_FILES = (("threading.py", "a lock, an event or another thread (threading)"), ("queue.py", "a queue"),
                  ("subprocess.py", "a child process (subprocess)"), ("multiprocessing/", "a child process or its pipe"),
                  ("concurrent/futures/", "a future of a thread or process pool"), ("selectors.py", "a socket"),
                  ("socket.py", "a socket"), ("ssl.py", "a network connection"), ("http/client.py", "an HTTP reply"),
                  ("asyncio/", "an asyncio event loop"))


def blocked_on(process, thread: str) -> str | None:
    """What the thread waits on when its innermost frames are a blocking primitive of the standard library."""
    frames = next((stack.frames for stack in process.threads if stack.name == thread), [])
    for frame in reversed(frames[-4:]):
        path = frame.file.replace("\\", "/")
        if "/site-packages/" in path or "/dist-packages/" in path:
            return None  # a library's own code: it may be computing
        for suffix, what in BLOCKING_FILES:
            if suffix in path and "/lib/python3" in path:
                return what
    return None


def late_rank_findings(ctx: Context) -> list[Finding]:
    """A rank gave up waiting, at the rendezvous or in a collective, while another was alive but busy outside
    torch.distributed: late, not lost. Where it was comes from its stack (taken before the lab stopped it), or, when
    it got there after all, from when each rank entered the collective (the Flight Recorder)."""
    if any(not echoes_a_peer(tb) for tb in ctx.tracebacks):
        return []  # a rank failed of its own (its error is the cause); the others were stopped wherever they were
    if waits.store_server_findings(ctx):
        return []  # not late: held for ever by a store server waiting for more clients than there are
    return _late_in_its_own_code(ctx) or _late_to_the_rendezvous(ctx) or _late_to_a_collective(ctx)


def _late_in_its_own_code(ctx: Context) -> list[Finding]:
    gave_up = next((line for line in ctx.lines if JOINED.search(line.text) or STORE_WAIT.search(line.text)), None)
    timed_out = next((tb for tb in ctx.tracebacks if tb.collective() and tb.collective() != "init_process_group"
                      and COLLECTIVE_TIMEOUT.search(tb.message)), None)
    if gave_up is None and timed_out is None:
        return []
    raised = {(tb.node, tb.rank) for tb in ctx.tracebacks}
    for process in ctx.evidence.processes:
        where = process.waiting() if process.role != "agent" else None
        if where is None or where.in_distributed_call or where.user_frame is None or \
                (process.node, process.rank) in raised:
            continue  # a rank that raised is ending (its stack is its exit), not busy elsewhere
        frame = where.user_frame
        who = f"rank {process.rank}" if process.rank is not None else "a process"
        here = f"{frame.function} ({frame.file}:{frame.line})"
        stack = f"node{process.node} {who}: in {frame.function} at {frame.file}:{frame.line} (its stack); "
        joining = stack + f"node{gave_up.node}: " + gave_up.text.strip()[:200] if gave_up is not None else ""
        if timed_out is not None:
            waiter = f"rank {timed_out.rank}" if timed_out.rank is not None else f"node{timed_out.node}"
            waiting = (stack + f"{timed_out.line.where()}: {timed_out.exc_type}: "
                       f"{timed_out.message.split('. ')[0]}")[:400]
        if timed_out is not None and (blocked := blocked_on(process, where.thread)):
            return [Finding(
                "late-rank", f"{who} on node{process.node} was blocked, not computing: in {here} it waited on "
                             f"{blocked} when {waiter} gave up waiting for it in {timed_out.collective()}",
                waiting, process.node, process.rank,
                f"find what {who}'s {frame.function} waits for ({blocked}) and why it never comes on that rank: a lock "
                "held by another thread, a worker or child process that died or never started, a server only some "
                "nodes reach; give that wait a timeout so the rank fails with its own error. A longer process-group "
                "timeout does not help a wait that never ends")]
        if gave_up is not None and (key := _users_own_key(ctx, gave_up)):
            return [Finding(
                "late-rank", f"{who} on node{process.node} never got past {here}, so the store key '{key}' another "
                             "rank waited for was never set", joining, process.node, process.rank,
                f"find what line {frame.line} of {frame.function} waits for: a TCPStore(is_master=True) made there "
                "waits until world_size clients connect (give it the number of processes that really connect, or "
                "wait_for_workers=False), a lock, a child process, another store key; a longer timeout cannot "
                "help a wait that never ends")]
        if gave_up is not None:
            return [Finding(
                "late-rank", f"{who} on node{process.node} was alive but late: still in {here} when "
                             f"node{gave_up.node} gave up waiting for it at the rendezvous",
                joining, process.node, process.rank, LATE_TO_JOIN_FIX)]
        return [Finding(
            "late-rank", f"{who} on node{process.node} was alive but late: still in {here} when {waiter} gave up "
                         f"waiting for it in {timed_out.collective()}",
            waiting, process.node, process.rank, LATE_IN_A_COLLECTIVE_FIX)]
    return []


def _late_to_the_rendezvous(ctx: Context) -> list[Finding]:
    """A rank gave up waiting for another at the rendezvous, which got there afterwards, dialling the address every
    rank was given: a store that had gone with the one that gave up. Late, not lost (nor a wrong address); what it
    did before is its own code above init_process_group."""
    return _late_and_still_dialling(ctx) or _late_and_dialled_in_vain(ctx)


def _late_and_still_dialling(ctx: Context) -> list[Finding]:
    """When the lab looked, the rank the other waited for was inside init_process_group, still dialling."""
    gave_up = next(((line, match) for line in ctx.lines if (match := STORE_WAIT.search(line.text))
                    and match["keys"] and missing_rank(match["keys"]) >= 0), None)
    if gave_up is None:
        return []
    line, match = gave_up
    wanted = missing_rank(match["keys"])
    for call in init_calls(ctx):
        process, where = call.process, call.process.waiting()
        rank = call.rank if call.rank is not None else process.rank
        given = f"{process.env.get('MASTER_ADDR')}:{process.env.get('MASTER_PORT')}"
        if rank != wanted or where is None or where.detail != f"TCPStore connect {given}":
            continue
        at = f" ({call.caller.file}:{call.caller.line})" if call.caller else ""
        return [Finding(
            "late-rank", f"rank {rank} on node{process.node} was alive but late: it reached init_process_group{at} "
                         f"after node{line.node} had given up waiting for it there, and still dialled {given}",
            f"node{process.node} rank {rank}: {where} (its stack when the lab stopped the run); {quote(line)}",
            process.node, rank, LATE_TO_JOIN_FIX)]
    return []


# glog's prefix of c10d's lines ("[E1125 15:55:09.373347766 socket.cpp:1028]"), and how long a connect was tried.
GLOG_TIME = re.compile(r"^\[?[EWIF](?P<month>\d{2})(?P<day>\d{2}) (?P<clock>\d{2}:\d{2}:\d{2}(?:\.\d+)?) ")
CONNECT_TIMED_OUT = re.compile(r"timed out after (?P<ms>\d+)ms while trying to connect")
DIALLED_LATE = 2.0  # seconds: the store closes before the node's command ends (its teardown), clocks drift
LATE_DIAL_WINDOW = 600.0  # seconds: later is not one run's rendezvous (or the node's clock is in another zone)


def _late_and_dialled_in_vain(ctx: Context) -> list[Finding]:
    """The rank dialled the rendezvous only after the node that waited for it had ended (c10d's line says when it
    gave up and after how long; the record says when that node ended), and gave up itself: it was late."""
    waiter = next((line for line in ctx.lines if JOINED.search(line.text) or STORE_WAIT.search(line.text)), None)
    ended = node_evidence(ctx.evidence, waiter.node).exited_at if waiter else None
    if ended is None:
        return []
    year = datetime.fromtimestamp(ended, timezone.utc).year  # glog's prefix leaves it out
    for line, host, port in connect_attempts(ctx):
        match, stamp = CONNECT_TIMED_OUT.search(line.text), GLOG_TIME.match(line.text)
        if not (match and stamp) or line.node == waiter.node or not _given_rendezvous(ctx, host, port):
            continue
        gave_up_at = datetime.strptime(f"{year}{stamp['month']}{stamp['day']} {stamp['clock'][:15]}",
                                       "%Y%m%d %H:%M:%S.%f" if "." in stamp["clock"] else "%Y%m%d %H:%M:%S")
        dialled_at = gave_up_at.replace(tzinfo=timezone.utc).timestamp() - int(match["ms"]) / 1000
        if not ended - DIALLED_LATE <= dialled_at <= ended + LATE_DIAL_WINDOW:
            continue  # dialled while the store was there (another fault), or a clock in another time zone
        who = f"rank {line.rank}" if line.rank is not None else "a process"
        return [Finding(
            "late-rank", f"{who} on node{line.node} was alive but late: it dialled the rendezvous "
                         f"({host}:{port}) only as node{waiter.node}, which had given up waiting for "
                         f"it there, ended ({dialled_at - ended:+.1f} s)",
            f"{quote(line)}; {quote(waiter)}", line.node, line.rank, LATE_TO_JOIN_FIX)]
    return []


def _given_rendezvous(ctx: Context, host: str, port: int) -> bool:
    """The address every rank was given (the lab's MASTER_ADDR:MASTER_PORT)."""
    hosts = {ctx.evidence.master_addr, rendezvous_host(ctx.evidence)} | set(env_values(ctx, "MASTER_ADDR"))
    return host in hosts and port == ctx.evidence.master_port


def _late_to_a_collective(ctx: Context) -> list[Finding]:
    """A rank entered a collective longer after another rank than that rank's timeout for it: the other had given
    up by then, so this one was alive but late, and the time went in its own code before the collective. Only
    processes of one attempt are compared: one started after the other entered (a restart) cannot be late to it."""
    traces = [trace for trace in ctx.evidence.traces if trace.rank is not None]
    lateness = []
    for late in traces:
        for waiter in traces:
            if waiter.key == late.key:
                continue
            for arrived in late.history:
                began = waiter.entered(arrived.seq)
                if began is None or began.operation != arrived.operation or None in (
                        began.entered_at, began.timeout_s, arrived.entered_at):
                    continue
                if late.started_at is not None and late.started_at > began.entered_at:
                    continue
                if arrived.entered_at - began.entered_at > began.timeout_s:
                    lateness.append((arrived.seq, began.entered_at - arrived.entered_at, late, waiter, arrived))
                    break
    if not lateness:
        return []
    _, _, late, waiter, arrived = min(lateness, key=lambda found: found[:2])
    began = waiter.entered(arrived.seq)
    gap, timeout = arrived.entered_at - began.entered_at, began.timeout_s
    own = next((tb for tb in ctx.tracebacks if tb.node == late.node and tb.rank in (late.rank, None)), None)
    frame = own.user_frame() if own else None
    at = f" at {frame.file}:{frame.line}" if frame else ""
    before = late.entered(arrived.seq - 1)
    spent = (f"{arrived.entered_at - before.entered_at:.1f} s after its collective {before}" if before and
             before.entered_at else f"{arrived.entered_at - late.started_at:.1f} s after it started"
             if late.started_at else "")
    said = last_own_line([line.text for line in ctx.lines if line.node == late.node and line.rank in (late.rank, None)])
    ended = _gave_up_at(ctx, waiter, arrived.operation)
    if ended is not None and 0 <= arrived.entered_at - ended < RELEASED_WITHIN_S:
        return [Finding(
            "late-rank", f"rank {late.rank} on node{late.node} reached {arrived}{at} only as rank {waiter.rank} gave up "
            f"and ended ({(arrived.entered_at - ended) * 1000:.1f} ms after): it was not slow but held by something "
            f"rank {waiter.rank} kept while it waited in the collective (a file lock, a lock or a socket its end "
            "released): a deadlock between that hold and the collective",
            f"collectives (Flight Recorder): rank {waiter.rank} entered {began}, gave up after {timeout:g} s and "
            f"ended; rank {late.rank} entered it {(arrived.entered_at - ended) * 1000:.1f} ms later"
            + (f"; its last output: {said}" if said else ""), late.node, late.rank,
            f"release what rank {waiter.rank} holds before it enters the collective: a file lock (fcntl.flock, "
            "filelock) only around the file work, never across dist.barrier() or another collective; or take such "
            "locks on every rank in one order outside the collectives")]
    return [Finding(
        "late-rank", f"rank {late.rank} on node{late.node} was alive but late: it reached {arrived}{at} {gap:.1f} s "
                     f"after rank {waiter.rank} (node{waiter.node}), whose {timeout:g} s timeout for it had run out",
        f"collectives (Flight Recorder): rank {waiter.rank} entered {began} and waited {timeout:g} s; rank "
        f"{late.rank} entered it {gap:.1f} s later" + (f", {spent}" if spent else "")
        + (f"; its last output: {said}" if said else ""), late.node, late.rank, LATE_IN_A_COLLECTIVE_FIX)]


RELEASED_WITHIN_S = 0.05  # a rank let go by another's end gets there within milliseconds of it


def _gave_up_at(ctx: Context, waiter, operation: str) -> float | None:
    """When the waiting rank's call of `operation` ended (its hooks' record), else when its node's process ended."""
    if waiter.calls is not None:
        ended = [call.ended_at for call in (*waiter.calls.failed, *waiter.calls.recent)
                 if call.op == operation and call.ended_at is not None]
        if ended:
            return max(ended)
    node = next((node for node in ctx.evidence.nodes if node.index == waiter.node), None)
    return node.exited_at if node is not None and ctx.evidence.nproc_per_node == 1 else None


def uneven_findings(ctx: Context) -> list[Finding]:
    """Ranks that finished normally while others still waited in a collective (a peer gone, a timeout, stopped, or
    still there when the lab stopped the run): the ranks ran different numbers of collectives, none of them crashed.
    The Flight Recorder, where the run has it, says how many each one ran."""
    if not ctx.multi_node:
        return []
    finished_nodes = [node.index for node in ctx.evidence.nodes if node.exit_code == 0]
    finished_ranks = [] if finished_nodes else _ranks_that_finished(ctx)
    if not finished_nodes and not finished_ranks:
        return []
    left = set(finished_ranks)

    def still_there(node: int, rank: int | None) -> bool:
        return node not in finished_nodes and (rank is None or rank not in left)

    waiting = [tb for tb in ctx.tracebacks if still_there(tb.node, tb.rank)
               and echoes_a_peer(tb)]
    stuck = None if waiting else next(
        (process for process in ctx.evidence.processes if still_there(process.node, process.rank)
         and process.role != "agent" and (where := process.waiting()) and where.in_distributed_call), None)
    if finished_ranks:
        # what each rank's recorder says must agree: the waiting rank went further than every rank that left
        behind = max(trace.reached for trace in ctx.evidence.traces if trace.rank in left)
        further = {trace.rank for trace in ctx.evidence.traces if trace.rank is not None and trace.reached > behind}
        waiting = [tb for tb in waiting if tb.rank in further]
        stuck = stuck if stuck is not None and stuck.rank in further else None
        who_left = " and ".join(f"rank {rank}" for rank in finished_ranks) + f" ({_nodes_of(ctx, finished_ranks)})"
        done, said_done = (f"{who_left} finished without an error",
                           f"{who_left}: ended without an error (their Flight Recorder, written as they ended)")
    else:
        who_left = ", ".join(f"node{index}" for index in finished_nodes)
        last = last_own_line([line.text for line in ctx.lines if line.node == finished_nodes[0]])
        done = f"{who_left} finished (exit 0)" + (f" after printing '{last}'" if last else "")
        said_done = f"{who_left}: exit 0"
    if waiting:
        tb = waiting[0]
        frame = tb.user_frame()
        node, rank, at = tb.node, tb.rank, f" at {frame.file}:{frame.line}" if frame else ""
        at = (f" ({tb.collective()})" if tb.collective() else "") + at
        said = (f"{said_done}; node{tb.node}" + (f" rank {tb.rank}" if tb.rank is not None else "")
                + f": {tb.exc_type}: {tb.message.split('. ')[0]}"[:300])
    elif stuck is not None and (ctx.evidence.timed_out or ctx.evidence.stopped):
        where = stuck.waiting()
        node, rank = stuck.node, stuck.rank
        at = (f" ({where.call})" if where.call else "") + (
            f" at {where.user_frame.file}:{where.user_frame.line}" if where.user_frame else "")
        said = f"{said_done}; node{stuck.node}" + (f" rank {stuck.rank}" if stuck.rank is not None else "") + \
            f": still in {where.call} when the lab stopped the run (its stack)"
    else:
        return []
    who = f"node{node}" + (f" rank {rank}" if finished_ranks and rank is not None else "")
    them = "them" if len(finished_ranks) > 1 else "it"
    return [Finding("uneven-collectives",
                    f"{done} while {who} still waited for {them} in a collective{at}: the ranks ran different "
                    "numbers of collectives", said + _collectives_reached(ctx), node, rank,
                    "give every rank the same number of steps: shard with DistributedSampler (drop_last=True, or "
                    "padding), or wrap DDP's loop in torch.distributed.algorithms.Join([model]) for uneven inputs; "
                    "never return or break early on one rank only (decide early stopping together: all_reduce the "
                    "flag), never skip a step on one rank only (an exception caught and `continue`, a non-finite loss "
                    "that skips backward: zero the loss instead, or all_reduce a skip flag so all skip together), "
                    "call a final barrier on every rank (outside any early return), and call no collective in code "
                    "only some ranks run (an evaluation under `if rank == 0`)")]


def _ranks_that_finished(ctx: Context) -> list[int]:
    """Ranks of nodes whose own exit code does not tell (the lab stopped a node whose torchrun waited for the others,
    or torchrun failed for its other ranks) that ended without an error: their recorder was written as they ended,
    no exception ended them, no traceback of theirs is in the log and torchrun reported no failure of theirs."""
    codes = {node.index: node.exit_code for node in ctx.evidence.nodes}
    failed = {rank for exits in ctx.reports.values() for rank, code in exits if code != 0}
    with_traceback = {tb.rank for tb in ctx.tracebacks if tb.rank is not None}
    single = ctx.evidence.nproc_per_node == 1 and not ctx.reports
    return sorted({trace.rank for trace in ctx.evidence.traces
                   if trace.rank is not None and trace.ended_without_error and trace.rank not in failed
                   and trace.rank not in with_traceback
                   and not (single and codes.get(trace.node) not in (0, None))  # its own exit code says it failed
                   and not any(tb.rank is None and tb.node == trace.node for tb in ctx.tracebacks)})


def _nodes_of(ctx: Context, ranks: list[int]) -> str:
    nodes = sorted({trace.node for trace in ctx.evidence.traces if trace.rank in ranks and trace.node is not None})
    return ", ".join(f"node{node}" for node in nodes)


def _collectives_reached(ctx: Context) -> str:
    """'; collectives (Flight Recorder): rank 0 reached #9 all_reduce float[9], rank 1 #8 ...' or ''."""
    ranked = [trace for trace in ctx.evidence.traces if trace.rank is not None and trace.last is not None]
    if len(ranked) < 2:
        return ""
    return "; collectives (Flight Recorder): " + ", ".join(
        f"rank {trace.rank} {'waits in' if trace.waiting_in else 'reached'} {trace.waiting_in or trace.last}"
        for trace in ranked)


def _called_at(ctx: Context, rank: int) -> str:
    """' (train.py:19)': the user's line a rank's stack stood at, when the lab took its stack."""
    for process in ctx.evidence.processes:
        if process.rank == rank and process.role != "agent" and (where := process.waiting()) and where.user_frame:
            return f" ({where.user_frame.location})"
    return ""


def group_cycle_findings(ctx: Context) -> list[Finding]:
    """A hung run whose ranks wait in collectives of different process groups, each for a rank that waits in another
    group: rank 0 in group A's all_reduce for rank 1, rank 1 in group B's for rank 0. Ranks that share several groups
    issued their collectives in different orders (a DDP per trial or per stage, stepped in a rank-dependent order)."""
    live = {trace.rank: trace for trace in ctx.evidence.traces if trace.live and trace.rank is not None}
    if len(live) < 2:
        return []
    members = {call.group_name: call.group for trace in ctx.evidence.traces for call in (
        trace.calls.groups if trace.calls else ()) if call.group_name and call.group}
    waits_for: dict[int, tuple[str, object, list[int]]] = {}  # rank -> (group, collective, the ranks it waits for)
    for rank, trace in live.items():
        for group, collective in sorted(trace.groups_waiting.items()):
            behind = [other for other in members.get(group, tuple(live)) if other != rank and other in live
                      and live[other].groups_reached.get(group, 0) < collective.seq]
            if behind:
                waits_for[rank] = (group, collective, behind)
                break
    cycle = _cycle({rank: waited[2] for rank, waited in waits_for.items()})
    if not cycle or len({waits_for[rank][0] for rank in cycle}) < 2:
        return []
    steps = "; ".join(f"rank {rank} waits in group {waits_for[rank][0]}'s {waits_for[rank][1]}{_called_at(ctx, rank)} "
                      f"for rank {cycle[(index + 1) % len(cycle)]}" for index, rank in enumerate(cycle))
    return [Finding(
        "group-wait-cycle", f"the ranks wait for each other across process groups: {steps}. Ranks that share these "
        "groups issued their collectives on them in different orders, so each waits in one group for a rank that "
        "waits in another", steps, live[cycle[0]].node, cycle[0],
        "issue every group's collectives in one order on every rank that belongs to several groups: step the models, "
        "trials or stages in a fixed order (by index, not starting from the rank's own), since a DDP's backward is a "
        "collective on the group it was built with; or give each its own ranks")]


def _cycle(edges: dict[int, list[int]]) -> list[int]:
    """The ranks of a cycle in `edges` (rank -> the ranks it waits for), in the order of the waits; [] if none."""
    for start in sorted(edges):
        path, rank = [start], start
        while (rank := next((other for other in edges.get(rank, []) if other in edges), None)) is not None:
            if rank in path:
                return path[path.index(rank):]
            path.append(rank)
    return []


def flight_findings(ctx: Context) -> list[Finding]:
    """A hung run whose ranks the lab asked for their Flight Recorder: the collective each one waits in. At the same
    sequence number, another operation is an order bug and other sizes a shape bug; at different numbers, the ranks
    are out of step (one skipped or added a collective)."""
    if cycle := group_cycle_findings(ctx):
        return cycle
    waiting = [trace for trace in ctx.evidence.traces if trace.live and trace.waiting_in and trace.rank is not None]
    if len(waiting) < 2:
        return []
    summary = "; ".join(f"rank {trace.rank} (node{trace.node}) waits in {trace.waiting_in}{_called_at(ctx, trace.rank)}"
                        for trace in waiting)
    calls = Counter((trace.waiting_in.seq, trace.waiting_in.operation, trace.waiting_in.sizes, trace.waiting_in.dtypes)
                    for trace in waiting)
    if len(calls) < 2:
        return []  # all in the same call: waiting for a rank that is not there (other rules say which)
    lonely = [trace for trace in waiting if calls[(trace.waiting_in.seq, trace.waiting_in.operation,
                                                   trace.waiting_in.sizes, trace.waiting_in.dtypes)] == 1]
    # the rank that differs from all the others; with two ranks (or no majority) the lowest one
    odd = lonely[0] if len(lonely) == 1 and len(waiting) > 2 else waiting[0]
    first = next(trace for trace in waiting if trace is not odd)
    fix = ("make every rank call the same collectives in the same order; a collective inside `if rank == ...` or a loop "
           "whose length differs per rank is the usual culprit")
    if odd.waiting_in.seq != first.waiting_in.seq:
        behind = min(waiting, key=lambda trace: trace.waiting_in.seq)
        ahead = max(trace.waiting_in.seq for trace in waiting) - behind.waiting_in.seq
        return [Finding("collective-mismatch", f"the ranks are out of step: rank {behind.rank} is {ahead} collective(s) "
                                               "behind the others", summary, behind.node, behind.rank, fix)]
    if odd.waiting_in.operation != first.waiting_in.operation:
        return [Finding("collective-mismatch", f"the ranks wait in different collectives at #{odd.waiting_in.seq} "
                                               f"({odd.waiting_in.operation} vs {first.waiting_in.operation})",
                        summary, odd.node, odd.rank, fix)]
    return [Finding("shape-mismatch", f"the ranks passed different tensors to collective #{odd.waiting_in.seq} "
                                      f"({odd.waiting_in} vs {first.waiting_in})", summary, odd.node, odd.rank,
                    "make every rank pass the same shape and dtype to each collective (pad or drop the uneven last "
                    "batch, e.g. DistributedSampler(drop_last=True))")]


def collective_findings(ctx: Context) -> list[Finding]:
    """Ranks waiting in different collectives (or the same one at different places): an order bug.

    From the Flight Recorder of a hang (flight_findings), else stack dumps when the lab took them, else from the
    collective each rank's traceback ended in.
    """
    if from_recorder := flight_findings(ctx) or out_of_step_findings(ctx):
        return from_recorder
    if any(tb.rank is not None and tb.short_type in ARGUMENT_ERRORS and not echoes_a_peer(tb) for tb in ctx.tracebacks):
        return []  # a rank refused what it was given and crashed: the others wait where its crash left them
    where: dict[int, tuple[str, Frame | None, str]] = {}
    for process in ctx.evidence.processes:
        if process.rank is None or process.role == "agent":
            continue
        collective, caller = collective_in(process.frames)
        where[process.rank] = (collective or "", caller, f"stack of pid {process.pid} on node{process.node}")
    if not where:
        for tb in ctx.tracebacks:  # ranks that waited and gave up (one that raised of its own crashed: not an order)
            if tb.rank is not None and tb.collective() and tb.rank not in where and \
                    echoes_a_peer(tb):
                where[tb.rank] = (tb.collective(), tb.user_frame(), quote(tb.line))
    in_collective = {rank: spot for rank, spot in where.items() if spot[0]}
    if not in_collective:
        return []
    places = {(name, caller.file, caller.line) if caller else (name, "", 0) for name, caller, _ in where.values()}
    if len(places) < 2:
        return []
    summary = "; ".join(
        f"rank {rank} in {name or 'no collective'}" + (f" ({caller.file.rsplit('/', 1)[-1]}:{caller.line})"
                                                       if caller else "")
        for rank, (name, caller, _) in sorted(where.items()))
    first = min(in_collective)
    odd_rank = _odd_one_out(where)
    names = {name for name, _, _ in where.values()}
    title = ("the ranks wait in different collectives" if len(names) > 1
             else f"the ranks call {next(iter(names))} from different places (another order)")
    return [Finding("collective-mismatch", title, summary, node_of_rank(ctx, odd_rank if odd_rank is not None
                                                                           else first),
                    odd_rank if odd_rank is not None else first,
                    "make every rank call the same collectives in the same order; a collective inside "
                    "`if rank == ...` or a loop whose length differs per rank is the usual culprit")]


OUT_OF_STEP_FIX = ("make every rank run the same collectives in the same order: a loop whose length differs per rank "
                   "(micro-batches or batches counted from each rank's own data: shard with DistributedSampler, or "
                   "agree on the count first with all_reduce(MIN); items of a list that must all count: one call for "
                   "the whole list, torch.cat of it gathered once, or MAX with padding), or a collective inside "
                   "`if rank == ...`, puts one rank's call against another's")


def out_of_step_findings(ctx: Context) -> list[Finding]:
    """Ranks whose recorders hold different calls at the same sequence number (another operation, dtype or number
    of dimensions, not only other sizes): they ran different numbers of collectives before it, so one rank's call
    met another's; gloo then reports the sizes that differ, which alone reads like a shape bug."""
    if left := _left_the_loop(ctx):
        return left
    ranked = [trace for trace in ctx.evidence.traces if trace.rank is not None]
    seqs = Counter(call.seq for trace in ranked for call in trace.history)
    common = max((seq for seq, count in seqs.items() if count > 1), default=None)
    if common is None:
        return []
    calls = {trace.rank: trace.entered(common) for trace in ranked if trace.entered(common)}
    kinds = Counter(_kind(call) for call in calls.values())
    if len(kinds) < 2:
        return []
    fewest = min(kinds.values())
    odd = min(rank for rank, call in calls.items() if kinds[_kind(call)] == fewest)
    others = sorted(rank for rank, call in calls.items() if _kind(call) != _kind(calls[odd]))
    named = " and ".join(f"rank {rank}" for rank in others)
    if (alone := _ddp_forward_alone(ctx, calls, odd, others)) is not None:
        return [alone]
    if (gathered := _state_dict_gathered_alone(ctx, calls, odd, others)) is not None:
        return [gathered]
    return [Finding(
        "collective-mismatch", f"the ranks are out of step: at #{common} rank {odd} called {_call(calls[odd])} while "
                               f"{named} called {_call(calls[others[0]])}: they ran different numbers of collectives "
                               "before it",
        "collectives (Flight Recorder): " + "; ".join(f"rank {rank} #{common} {_call(call)}"
                                                        for rank, call in sorted(calls.items())),
        node_of_rank(ctx, odd), odd, OUT_OF_STEP_FIX)]


def _ddp_forward_alone(ctx: Context, calls: dict, odd: int, others: list[int]) -> Finding | None:
    """One side of the mismatch is DDP's own broadcast of the buffers, made by its forward on a rank that ran the
    wrapped model alone (an evaluation under `if rank == 0`), while the other ranks were elsewhere."""
    for rank, tb in _tracebacks_through(ctx, [odd, *others], {"_sync_buffers", "_sync_module_buffers"}):
        user = tb.user_frame()
        rest = sorted(set(calls) - {rank})
        at = f" at {user.location} in {user.function}" if user else ""
        if (loop := _forward_in_a_loop(ctx, user)) is not None:
            return Finding(
                "collective-mismatch", f"the ranks ran the DDP-wrapped model different numbers of times{at}: it runs "
                f"once per item of `{loop}`, whose length differs per rank (each rank's own data), and each forward "
                f"broadcasts the buffers ({_call(calls[rank])}), so rank {rank}'s extra forward met "
                + " and ".join(f"rank {other}" for other in rest) + f"'s {_call(calls[rest[0]])}",
                f"rank {rank}: {tb.exc_type}: {tb.message}"[:300], tb.node, rank,
                "make the number of forward calls per step the same on every rank: run the items as one batch "
                "through one forward, or a fixed number of them (sample or pad to it); or build DDP with "
                "broadcast_buffers=False where the buffers need no syncing at each forward")
        return Finding(
            "collective-mismatch", f"rank {rank} ran the DDP-wrapped model{at} while "
            + " and ".join(f"rank {other}" for other in rest) + f" did not: DDP's forward broadcasts the buffers "
            f"({_call(calls[rank])}), a collective the other ranks never make there (they called "
            f"{_call(calls[rest[0]])})", f"rank {rank}: {tb.exc_type}: {tb.message}"[:300], tb.node, rank,
            "run the DDP model's forward on every rank or on none: evaluate the bare model on one rank "
            "(model.module(x), under torch.no_grad()), or evaluate on every rank and reduce the metrics")
    return None


def _forward_in_a_loop(ctx: Context, frame) -> str | None:
    """The loop (or comprehension) of the job's code the frame's line runs in, not under a test of the rank: what
    makes a rank run its model as many times as its own data has items."""
    place = parsed_files(ctx) and frame and source_named(parsed_files(ctx), frame.file)
    statement = place.statement_at(frame.line) if place else None
    if statement is None:
        return None
    comprehension = next((node for node in walk(statement) if isinstance(node, (ast.ListComp, ast.GeneratorExp))
                          and node.lineno <= frame.line <= (node.end_lineno or node.lineno)), None)
    loop = comprehension.generators[0] if comprehension is not None else place.loop_of(statement)
    function = place.function_of(statement)
    tests = conditions_above(place, statement) + [test for call in calls_named(place, {getattr(function, "name", "")})
                                                  for test in conditions_above(place, call)] + (
        [test for generator in comprehension.generators for test in generator.ifs] if comprehension else [])
    if loop is None or any(identifier(node) in RANK_NAMES or call_name(node) in ("get_rank",)
                           for test in tests for node in walk(test)):
        return None  # run on some ranks only: _ddp_forward_alone's case
    return f"for {ast.unparse(loop.target)} in {ast.unparse(loop.iter)[:50]}"


def _tracebacks_through(ctx: Context, ranks: list[int], functions: set[str]):
    """(rank, its traceback) for each of `ranks`, in order, whose traceback passes through one of `functions`."""
    for rank in ranks:
        tb = next((tb for tb in ctx.tracebacks if tb.rank == rank
                   and any(frame.function in functions for frame in tb.frames)), None)
        if tb is not None:
            yield rank, tb


STATE_DICT_GATHERS = {"get_model_state_dict", "get_state_dict", "get_optimizer_state_dict", "full_tensor",
                      "_gather_state_dict", "full_optim_state_dict", "_full_post_state_dict_hook"}


def _state_dict_gathered_alone(ctx: Context, calls: dict, odd: int, others: list[int]) -> Finding | None:
    """One side of the mismatch is a sharded model's state dict being gathered whole (get_model_state_dict with
    full_state_dict, DTensor.full_tensor): a collective of every rank, made by one rank alone (a save under
    `if rank == 0`)."""
    for rank, tb in _tracebacks_through(ctx, [odd, *others], STATE_DICT_GATHERS):
        gather = next(frame for frame in tb.frames if frame.function in STATE_DICT_GATHERS)
        user = tb.user_frame()
        rest = sorted(set(calls) - {rank})
        at = f" at {user.location} in {user.function}" if user else ""
        return Finding(
            "collective-mismatch", f"rank {rank} gathered the sharded model's full state dict ({gather.function}"
            f"{at}) while " + " and ".join(f"rank {other}" for other in rest) + " did not: gathering the shards is "
            f"a collective every rank must join ({_call(calls[rank])}), and the others were at "
            f"{_call(calls[rest[0]])} (a save under `if rank == 0`)", f"rank {rank}: {tb.exc_type}: {tb.message}"[:300],
            tb.node, rank,
            "gather the state dict on every rank and save on one: call get_model_state_dict(model, options="
            "StateDictOptions(full_state_dict=True, cpu_offload=True)) on all ranks (with cpu_offload only rank 0 "
            "keeps the full dict), then torch.save under `if rank == 0`; or save sharded with torch.distributed."
            "checkpoint.save on every rank")
    return None


SIZES_MET = re.compile(r"Received data size doesn't match|op\.preamble\.length <= op\.nbytes")


def _left_the_loop(ctx: Context) -> list[Finding]:
    """A size error of gloo where one rank was still in backward (DDP's gradient all_reduce, inside autograd) while
    the rank that met it had made a collective of its own: that rank left the training loop first, so its call met a
    gradient bucket. The ranks ran different numbers of steps, not one call with other sizes."""
    met = next((line for line in ctx.lines if SIZES_MET.search(line.text) and line.rank is not None), None)
    if met is None:
        return []
    in_backward = [process for process in ctx.evidence.processes if process.rank is not None and process.rank != met.rank
                   and any(frame.function in ("backward", "_engine_run_backward") for thread in process.threads[:1]
                           for frame in thread.frames)]
    own_call = _own_collective(ctx, met)
    if not in_backward or own_call is None:
        return []
    other = in_backward[0]
    line = other.waiting().user_frame if other.waiting() else None
    where = f" ({line.location})" if line else ""
    return [Finding(
        "collective-mismatch", f"the ranks ran different numbers of steps: rank {met.rank} had left its training loop "
        f"and called {own_call} while rank {other.rank} was still in backward{where}, whose DDP gradient all_reduce "
        "its call met (hence the sizes that differ)", met.text[:300], met.node, met.rank,
        "give every rank the same number of batches: filter or split the data so each rank gets as many (shard "
        "after filtering; DistributedSampler(drop_last=True)), agree on the count first (all_reduce(MIN) of the "
        "batches and stop there), or wrap the loop in model.join() (torch.distributed.algorithms.Join)")]


def _own_collective(ctx: Context, met: LogLine) -> str | None:
    """'all_reduce at x.py:39': the collective the user's code was in on `met`'s rank, from its traceback or its
    faulthandler stack (innermost first there)."""
    frames = [FAULTHANDLER_FRAME.match(line.text) or TRACEBACK_FRAME.match(line.text) for line in ctx.lines
              if line.node == met.node and line.rank == met.rank]
    frames = [frame for frame in frames if frame]
    for index, frame in enumerate(frames):
        if frame["file"].endswith("distributed_c10d.py") and not frame["function"].startswith("_"):
            user = next((other for other in frames[index + 1:] if not LIBRARY_FILE.search(other["file"])), None)
            if user is not None:
                return f"{frame['function']} at {user['file'].rsplit('/', 1)[-1]}:{user['line']}"
    return None


# A list that only the root holds (scatter's inputs, gather's outputs): the other ranks record none.
ROOT_ONLY_LISTS = {"scatter", "gather"}


def _kind(call) -> tuple:
    if call.operation in ROOT_ONLY_LISTS:
        return (call.operation,)
    return call.operation, call.dtypes, tuple(len(shape) for shape in call.sizes)


def _call(call) -> str:
    return str(call).split(" ", 1)[1]  # without its '#N'


def _odd_one_out(where: dict[int, tuple[str, Frame | None, str]]) -> int | None:
    """The rank whose place differs from all the others, when there is exactly one such rank."""
    keys = {rank: (name, (caller.file, caller.line) if caller else None) for rank, (name, caller, _) in where.items()}
    counts = Counter(keys.values())
    lonely = [rank for rank, key in keys.items() if counts[key] == 1]
    return lonely[0] if len(lonely) == 1 else None


def _shape_mismatch(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    if out_of_step_findings(ctx):
        return None  # different calls met, not one call with other sizes
    sent = next((call for trace in ctx.evidence.traces if trace.calls for call in trace.calls.recent + trace.calls.pending
                 if call.op in ("send", "isend") and call.dst is not None and call.dst == line.rank), None)
    if (hooked := _collective_in_a_hook(ctx)) is not None:
        return hooked
    if (filtered := _sized_by_a_local_filter(ctx)) is not None:
        return filtered
    if (padded := _padded_along_the_last_dim(ctx)) is not None:
        return padded
    if (dtypes := _dtypes_differ(ctx, line)) is not None:
        return dtypes
    if lists := _object_lists(ctx):
        return (f"the ranks passed object lists of different lengths to broadcast_object_list ({lists}): it sends the "
                "objects' sizes as a tensor of the list's length first, and those tensors differ",
                "give broadcast_object_list a list of the same length on every rank: the source its objects, the others "
                "[None] * the same N (agree on N first, e.g. broadcast it, or send one object: a dict or a list)")
    if (buffers := _ddp_synced_buffers(ctx)) is not None:
        return buffers
    if (lists := _tensor_lists_differ(ctx)) is not None:
        return lists
    if sent is not None:
        return (f"rank {line.rank} received a message of another size than its buffer: {sent}",
                "give the receiving buffer the sender's shape and dtype: send the shape first (a small tensor) and "
                "allocate from it, or use send_object_list for data whose size varies")
    return ("the ranks passed tensors of different sizes to the same collective", SIZES_FIX)


def _padded_along_the_last_dim(ctx: Context) -> tuple[str, str] | None:
    """A collective of tensors of two or more dimensions, made by F.pad with one pair of widths: F.pad's pairs start at
    the last dimension, so padding meant to add rows adds columns, and only on the ranks that had rows to add."""
    files = parsed_files(ctx)
    for trace in ctx.evidence.traces:
        for call in (trace.calls.recent + trace.calls.failed + trace.calls.pending) if trace.calls else ():
            if not call.tensors or len(call.tensors[-1].shape) < 2:
                continue
            source, collective = collective_at(files, call) or (None, None)
            given = collective.args[-1] if collective is not None and call.op != "all_gather" else \
                collective.args[1] if collective is not None and len(collective.args) > 1 else None
            pad = next((node for part in made_of(source, given, source.function_of(collective)) for node in walk(part)
                        if isinstance(node, ast.Call) and call_name(node) == "pad" and len(node.args) > 1
                        and isinstance(node.args[1], (ast.Tuple, ast.List)) and len(node.args[1].elts) == 2),
                       None) if given is not None else None
            if pad is None:
                continue
            return (f"the ranks passed tensors of different shapes to {call.op} at {call.caller.split(' in ')[0]}: "
                    f"`{ast.unparse(pad)[:50]}` (line {pad.lineno}) pads the last dimension, since F.pad's pairs "
                    f"start at the last one, so on a rank with something to pad the tensor grows along its last "
                    f"dimension, not its first (rank {trace.rank} passed {call.tensors[-1]})",
                    "give F.pad a pair for every dimension up to the one to pad, last first: F.pad(x, (0, 0, 0, n)) "
                    "adds n rows to a 2-D tensor; or join a block of zeros: torch.cat([x, x.new_zeros(n, *x.shape[1:])])")
    return None


HOOK_REGISTRATIONS = {"register_hook", "register_post_accumulate_grad_hook", "register_full_backward_hook",
                      "register_backward_hook", "register_full_backward_pre_hook", "register_forward_hook",
                      "register_forward_pre_hook", "register_multi_grad_hook"}


def _collective_in_a_hook(ctx: Context) -> tuple[str, str] | None:
    """A collective the ranks made from inside an autograd or module hook: autograd calls a tensor's hook only when a
    gradient reaches that tensor, so ranks that used different parts (a task head, a branch) make different numbers of
    these calls, and the collectives after them meet another rank's call."""
    files = parsed_files(ctx)
    for trace in ctx.evidence.traces:
        for call in (trace.calls.recent + trace.calls.failed + trace.calls.pending) if trace.calls else ():
            place = caller_place(call.caller)
            source = source_named(files, place[0]) if place else None
            made = source.statement_at(place[1]) if source else None
            hook = source.function_of(made) if made is not None else None
            registered = _registered_as_hook(source, hook) if isinstance(hook, ast.FunctionDef) else None
            if registered is None:
                continue
            last = next(iter(trace.calls.failed[-1:] + trace.calls.pending[-1:]), None)
            met = f"; rank {trace.rank}'s next call, {last.op} at {last.caller}, then met another rank's" if last \
                and last is not call else ""
            return (f"the ranks' collectives fell out of step: {call.op} at {source.name}:{place[1]} runs inside "
                    f"`{hook.name}`, a hook registered with {call_name(registered)} (line {registered.lineno}), which "
                    "runs only for the tensors (or modules) a rank's backward or forward reached: ranks that used "
                    f"different parts (task heads, branches) make different numbers of these calls{met}",
                    "make no collective inside a hook: in the hook only record the value (keep 0 for the parts a "
                    "rank did not use), then reduce all of them as one tensor at the same point on every rank, after "
                    "backward (or where the gradients are averaged)")
    return None


def _registered_as_hook(source, hook: ast.FunctionDef) -> ast.Call | None:
    """The register_*hook call given `hook` itself, or the call of a function that defines and returns it."""
    makers = {function.name for function in source.walk() if isinstance(function, ast.FunctionDef)
              and hook in function.body}
    for call in (node for node in source.walk() if isinstance(node, ast.Call) and call_name(node) in HOOK_REGISTRATIONS):
        for given in call.args[:1] + [item.value for item in call.keywords if item.arg in ("hook", "fn")]:
            named = given.func if isinstance(given, ast.Call) else given
            name = named.attr if isinstance(named, ast.Attribute) else getattr(named, "id", None)
            if name == hook.name or (isinstance(given, ast.Call) and name in makers):
                return call
    return None


def _sized_by_a_local_filter(ctx: Context) -> tuple[str, str] | None:
    """The collective whose sizes differed passes a tensor made from a list that each rank filters by its own data
    (the hooks say which call failed, the job's code how its tensor was made)."""
    files = parsed_files(ctx)
    for trace in ctx.evidence.traces:
        for call in (trace.calls.failed[-1:] + trace.calls.pending[-1:]) if trace.calls else ():
            source, collective = collective_at(files, call) or (None, None)
            if collective is None:
                continue
            kept = kept_by_a_local_test(source, collective.args[0], source.function_of(collective))
            if kept is None:
                continue
            listed, test, skips = kept
            return (f"the ranks passed tensors of different sizes to {call.op} at {call.caller.split(' in ')[0]}: "
                    f"`{ast.unparse(collective.args[0])[:40]}` is made from `{listed}`, whose items each rank "
                    f"{'skips where' if skips else 'keeps only where'} `{ast.unparse(test)[:70]}` (line {test.lineno}) "
                    "holds on its own data, so its length "
                    f"differs per rank (rank {trace.rank} passed {', '.join(map(str, call.tensors[:2]))})",
                    "decide what to keep from what every rank agrees on: keep every item on every rank (a zero entry "
                    "where a rank has none of it) and filter after the collective, or first reduce what the test reads "
                    "(all_reduce the per-item counts or ranges) and filter the same way everywhere")
    return None


# DDP's own broadcasts of rank 0's parameters and buffers: when it wraps the model, and buffers before each forward.
DDP_SYNC = re.compile(r"\b_sync_(?:module_states|params_and_buffers|buffers|module_buffers)\b")


def _ddp_synced_buffers(ctx: Context) -> tuple[str, str] | None:
    """Sizes that differ in DDP's broadcast of the model's state, in a job that registers buffers: a buffer holds
    each rank's own data (a shard, a memory, a per-rank count), and DDP sends rank 0's to every rank."""
    if not any(DDP_SYNC.search(other.text) for other in ctx.lines):
        return None
    registered = job_lines(ctx, lambda code: "register_buffer(" in code)
    if not registered:
        return None
    shown = ", ".join(f"`{text[:60]}` ({name}:{number})" for name, number, text in registered[:2])
    return (f"the ranks' models hold buffers of different sizes ({shown}): DDP broadcasts rank 0's parameters and "
            "buffers to every rank when it wraps the model, and its buffers again before each forward, so a buffer "
            "filled with each rank's own data (a shard, a memory bank) cannot be received",
            "keep per-rank data out of the wrapped module's buffers: hold it as a plain attribute (or outside the "
            "module), or tell DDP to leave it alone (DistributedDataParallel._set_params_and_buffers_to_ignore_for_"
            "model(model, [names]) before wrapping, or broadcast_buffers=False when no other buffer needs syncing); "
            "buffers DDP syncs must have the same shape on every rank")


# Ways to list a model's tensors, and what each holds.
MODEL_TENSORS = {"state_dict": "parameters and buffers", "parameters": "parameters only",
                 "named_parameters": "parameters only", "buffers": "buffers only"}


def _tensor_lists_differ(ctx: Context) -> tuple[str, str] | None:
    """Loops of one collective (broadcast, all_reduce) over a model's tensors, listed one way on one side and another
    way on the other (state_dict() where the receiver walks parameters()): the i-th tensors are not the same one."""
    files = {path.rsplit("/", 1)[-1]: text.splitlines() for trace in ctx.evidence.traces
             for path, text in trace.sources.items()}
    loops = []
    for name, number, text in job_lines(ctx, re.compile(r"^\s*for .* in .*\.(state_dict|parameters|named_parameters|"
                                                          r"buffers)\(\)").search):
        body = " ".join(files.get(name, [])[number:number + 3])  # a collective right inside the loop
        if re.search(r"\b(?:broadcast|all_reduce|reduce|send|recv|isend|irecv|all_gather)\(", body):
            listed = re.search(r"\.(state_dict|parameters|named_parameters|buffers)\(\)", text)[1]
            loops.append((name, number, text, listed))
    kinds = {MODEL_TENSORS[listed] for *_, listed in loops}
    if len(kinds) < 2:
        return None
    first, other = loops[0], next(loop for loop in loops if MODEL_TENSORS[loop[3]] != MODEL_TENSORS[loops[0][3]])
    return (f"the ranks walk the model's tensors in two different lists: `{first[2][:60]}` ({first[0]}:{first[1]}, "
            f"{MODEL_TENSORS[first[3]]}) and `{other[2][:60]}` ({other[0]}:{other[1]}, {MODEL_TENSORS[other[3]]}), "
            "so one side's i-th collective carries another tensor than the other side's",
            "send and receive the same list in the same order on every side: state_dict().values() on both (buffers "
            "included: a normaliser's running statistics), or parameters() on both and the buffers sent apart")


def _object_lists(ctx: Context) -> str | None:
    """'rank 0 list of 2' for the ranks whose hooks saw them in broadcast_object_list when it failed, or the
    traceback's call; None when no rank was in one."""
    seen = {trace.rank: call.argument("object_list") or "a list"
            for trace in ctx.evidence.traces if trace.calls and trace.rank is not None
            for call in trace.calls.failed[-1:] + trace.calls.pending[-1:] if call.op == "broadcast_object_list"}
    seen.update({tb.rank: "a list" for tb in ctx.tracebacks if tb.rank is not None and tb.rank not in seen
                 and any(frame.function == "broadcast_object_list" for frame in tb.frames)})
    return ", ".join(f"rank {rank} {text}" for rank, text in sorted(seen.items(), key=lambda item: str(item[0]))) \
        if seen else None


SIZES_FIX = ("make every rank pass the same shape and dtype to each collective: for data whose length varies per rank "
             "(tokens, detections, a vocabulary read from each node's own file), all_gather the lengths first and pad "
             "to the longest, or use all_gather_object / broadcast_object_list; pad or drop an uneven last batch "
             "(DistributedSampler(drop_last=True)); if the sizes are of different tensors altogether, the ranks are "
             "out of step: one ran more collectives before this one (a loop whose length differs per rank); "
             "TORCH_DISTRIBUTED_DEBUG=DETAIL names the shapes")


GLOO_SIZES = re.compile(r"op\.nbytes\. (?P<received>\d+) vs (?P<expected>\d+)")
DTYPE_SIZES = {8: "a 64-bit type (float64, int64)", 4: "a 32-bit type (float32, int32)", 2: "a 16-bit type "
               "(float16, bfloat16)", 1: "an 8-bit type (uint8, bool)"}


def _dtypes_differ(ctx: Context, line: LogLine) -> tuple[str, str] | None:
    """gloo's 'received R vs expected E bytes' against the one rank's collective the hooks saw: the same number of
    elements with another element size is a dtype that differs, not a shape."""
    sizes = GLOO_SIZES.search(line.text)
    known = [(trace.rank, call) for trace in ctx.evidence.traces if trace.calls and trace.rank != line.rank
             for call in trace.calls.failed[-1:] + trace.calls.pending[-1:] if len(call.tensors) == 1]
    if sizes is None or not known:
        return None
    rank, call = known[0]
    element = DTYPE_BYTES.get(call.tensors[0].dtype)
    received, expected = int(sizes["received"]), int(sizes["expected"])
    if not element or not received or (element * expected) % received:
        return None
    other = element * expected // received
    if other == element or _dtype_fixed_in_code(ctx, call):
        return (f"the ranks passed tensors of different sizes to {call.op}: rank {rank} passed {call.tensors[0]}, "
                f"rank {line.rank} another length ({sizes['received']} bytes came where {sizes['expected']} were "
                "expected)", SIZES_FIX)
    if other not in DTYPE_SIZES:
        return None
    return (f"the ranks passed tensors of different dtypes to {call.op}: rank {rank} {call.tensors[0]}, rank "
            f"{line.rank} {DTYPE_SIZES[other]} ({sizes['received']} bytes came where {sizes['expected']} were "
            "expected)", "give every rank the same dtype: cast before the collective (tensor.to(torch.float32), or "
            "build it with dtype=...), and look for a value that changes type on one rank only (a numpy float64, a "
            "Python int)")


CASTS = {"double", "float", "half", "bfloat16", "long", "int", "to"}


def _dtype_fixed_in_code(ctx: Context, call) -> bool:
    """The tensor the hooks saw passed to `call` is made, in the job's code, with a dtype it names (dtype=..., .double(),
    .to(torch.float64)): every rank makes it with that dtype, so a byte count that differs is a length that does."""
    source, collective = collective_at(parsed_files(ctx), call) or (None, None)
    if collective is None:
        return False
    return any(isinstance(node, ast.Call) and (any(item.arg == "dtype" for item in node.keywords) or (
        isinstance(node.func, ast.Attribute) and node.func.attr in CASTS and (node.func.attr != "to" or any(
            "torch." in ast.unparse(given) for given in node.args))))
        for part in made_of(source, collective.args[0], source.function_of(collective)) for node in walk(part))


def _fingerprint_mismatch(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL's report: a different OpType is an order bug, the same one a shape bug."""
    ops = re.findall(r"OpType=(\w+)", line.text)
    if len(set(ops)) > 1:
        return None
    return _shape_mismatch(match, line, ctx)


def _op_mismatch(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    ops = re.findall(r"OpType=(\w+)", line.text)
    if len(set(ops)) < 2:
        return None
    return (f"the ranks called different collectives at the same point ({' vs '.join(dict.fromkeys(ops))})",
            "make every rank call the same collectives in the same order (no collective inside a branch on rank "
            "or on data that differs per rank)")


def _unused_parameters(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    named = near(ctx, line, r"Parameters which did not receive grad for rank (\d+): (.+)")
    indices = near(ctx, line, r"Parameter indices which did not receive grad for rank (\d+): ([\d ]+)")
    which = (f"{named[2].strip()}" if named else f"parameter indices {indices[2].strip()}" if indices
             else "some parameters")
    rank = (named or indices)[1] if (named or indices) else "?"
    if (steps := _gradient_reductions(ctx, line)) >= 2:
        return (f"DDP got no gradient for {which} (rank {rank}) after {steps} steps that reduced every gradient: they "
                "stopped getting gradients mid-run (requires_grad turned off after DDP wrapped the model, or a branch "
                "that skips them from then on), and DDP's reducer still waits for them",
                "change which parameters train before wrapping the model: freeze them first and then build "
                "DistributedDataParallel (or build a new one after changing requires_grad); if they are skipped only "
                "on some steps, pass find_unused_parameters=True")
    return (f"DDP got no gradient for {which} (rank {rank}): "
            "the loss does not use them", "remove the parameters the forward pass never uses (or freeze them: "
            "requires_grad=False); if they are used only on some steps, pass find_unused_parameters=True to "
            "DistributedDataParallel" + ("" if named else "; TORCH_DISTRIBUTED_DEBUG=INFO names them"))


def _gradient_reductions(ctx: Context, line: LogLine) -> int:
    """How many whole steps of DDP's gradient all_reduce the rank finished, as its Flight Recorder kept them: its
    float all_reduce entries over the number of bucket shapes (0 without a recorder)."""
    trace = next((trace for trace in ctx.evidence.traces if trace.node == line.node
                  and (line.rank is None or trace.rank == line.rank)), None)
    reductions = [entry.sizes for entry in trace.history if entry.operation == "all_reduce"
                  and all(dtype.lower().startswith(("float", "half", "bfloat")) for dtype in entry.dtypes)] if trace else []
    return len(reductions) // len(set(reductions)) if reductions else 0


TIED = re.compile(r"\.weight\s*=\s*[\w.]+\.weight\s*$")
MATERIALIZED = re.compile(r"\bto_empty\s*\(")


def _model_mismatch(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    counts = re.search(r"Rank (\d+) has (\d+) params, while rank (\d+) has inconsistent (\d+) params", line.text)
    ties, emptied = job_lines(ctx, TIED.search), job_lines(ctx, MATERIALIZED.search)
    if counts and ties and emptied:
        tie, empty = ties[0], emptied[0]
        return (f"rank {counts[1]} has {counts[2]} parameters and rank {counts[3]} {counts[4]}: the model ties two "
                f"weights (`{tie[2][:50]}`, {tie[0]}:{tie[1]}), and `{empty[2][:40]}` ({empty[0]}:{empty[1]}) on the "
                "ranks that built it on the meta device gives each its own storage, which unties them into two "
                "parameters",
                f"tie the weights again after to_empty() and after loading (`{tie[2][:50]}` once more, or the "
                "model's tie_weights()), on every rank, before DDP wraps it; or build the model the same way on every "
                "rank and let DDP broadcast rank 0's weights")
    shape = re.search(r"\[(\d+)\]: params\[(\d+)\] in this process with sizes (\[[^\]]*\]) appears not to match "
                      r"sizes of the same param in process (\d+)", line.text)
    detail = (f": rank {shape[1]}'s params[{shape[2]}] is {shape[3]}, not the shape rank {shape[4]} has" if shape
              else "")
    return (f"the ranks built different models, so DDP cannot keep them in step{detail}",
            "build the same model on every rank: the same code, config and checkpoint on every node (a config "
            "read per node, a rank-dependent layer size or a stale file on one node makes them differ)")


STRIDED_VIEW = re.compile(r"assign\s*=\s*True|\.T\b|\.t\(\)|\.transpose\(|\.permute\(")


def _layout_lines(ctx: Context) -> str:
    """' (`...`, file:line)': the job's lines that make strided views or assign tensors as parameters."""
    found = job_lines(ctx, STRIDED_VIEW.search)
    return f" ({', '.join(f'`{text[:50]}`, {name}:{number}' for name, number, text in found[:2])})" if found else ""


PATTERNS = [
    PatternRule("ddp-unused-parameters", re.compile(
        r"Expected to have finished reduction in the prior iteration"), _unused_parameters),
    PatternRule("ddp-parameter-mismatch", re.compile(
        r"appears not to match sizes of the same param in process|DDP expects same model across all ranks"),
        _model_mismatch),
    PatternRule("ddp-parameter-mismatch", re.compile(
        r"params\[(?P<index>\d+)\] in this process with sizes (?P<sizes>\[[^\]]*\]) appears not to match strides of "
        r"the same param in process (?P<other>\d+)"), lambda match, line, ctx: (
        f"rank {line.rank if line.rank is not None else '?'}'s params[{match['index']}] has the shape of process "
        f"{match['other']}'s ({match['sizes']}) but another memory layout (strides): it was made from a transposed or "
        "otherwise strided view on some ranks only" + _layout_lines(ctx) + "; DDP needs the same layout everywhere",
        "make the parameters contiguous before DDP, the same on every rank: load converted weights with .contiguous() "
        "(torch.from_numpy(kernel).T.contiguous()), or copy them into the existing parameters (load_state_dict "
        "without assign=True); load the checkpoint the same way on every rank")),
    PatternRule("collective-mismatch", re.compile(r"Detected mismatch between collectives on ranks"), _op_mismatch),
    PatternRule("shape-mismatch", re.compile(r"Detected mismatch between collectives on ranks"), _fingerprint_mismatch),
    PatternRule("shape-mismatch", re.compile(
        r"op\.preamble\.length <= op\.nbytes|Received data size doesn't match expected size"
        r"|[Mm]essage truncated|[Tt]ensors? must have (?:the )?same (?:size|shape|number of elements)"
        r"|size mismatch in collective|Mismatch between collective"), _shape_mismatch),
]
