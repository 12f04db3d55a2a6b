"""What every rank was doing when the run failed or hung, matched across ranks: the first disagreement between their
pending torch.distributed calls names the cause, whatever the job's own messages say.

Each rank's call comes from the jobs' hooks (lab/analysis/calls.py: the call with its arguments), else from its stack
(py-spy's locals of torch's frame), else from its traceback (the operation alone). The rules look, in this order, for
point-to-point calls that wait on each other (a cycle of receives, a send whose receiver waits for another peer or
tag), collectives whose roots or groups differ, subgroups created differently, store keys waited for and never set,
and a collective that every rank entered alike and that still timed out: its timeout was too short for the bytes.
A rank inside no distributed call is busy: where a rank waits for its DataLoader worker, the worker's stack says where.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections import Counter
from dataclasses import dataclass, replace

from lab.analysis.calls import POINT_TO_POINT, ROOTED, DistCall, StoreOp
from lab.analysis.diagnosis.context import SYMPTOM, Context, echoes_a_peer, node_of_rank
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.logs import exit_text, last_own_line
from lab.analysis.diagnosis.sources import (RANK_CALLS, RANK_NAMES, RANK_VARIABLES, SourceFile, assignments, call_name,
                                            endless_stream, holds, parsed_files, source_named, walk)
from lab.analysis.stacks import Frame, ProcessStack

RECEIVES = ("recv", "irecv", "recv_object_list")
SENDS = ("send", "isend", "send_object_list")
GROUP_CREATION = ("new_group", "new_subgroups", "new_subgroups_by_enumeration")
# gloo's, NCCL's and the store's words for a wait that ran out of time.
TIMED_OUT = re.compile(r"[Tt]imed out|[Tt]imeout|timed out after|wait timeout", re.IGNORECASE)
WAITED_MS = re.compile(r"(?:[Tt]imed out waiting|timeout after|[Tt]imeout of) (?P<ms>\d+)\s*ms")
GLOO_DIRECTION = re.compile(r"for (?P<direction>send|recv) operation")  # what a gloo wait that timed out waited for
# The c10d functions whose frame, in a stack, says which call a rank waits in (py-spy keeps torch frames' locals).
C10D_FILE = "distributed_c10d.py"


@dataclass(frozen=True)
class Activity:
    """The distributed call one rank was in when the run ended (or that it gave up in), and how the lab knows."""

    rank: int
    node: int | None
    call: DistCall
    timed_out: bool  # it gave up in that call at its timeout
    source: str  # 'hooks' (with every argument), 'stack' (py-spy's locals), 'traceback' (the operation only)

    def __str__(self) -> str:
        return f"rank {self.rank} {'gave up in' if self.timed_out else 'waits in'} {self.call}"


def rank_activities(ctx: Context) -> dict[int, Activity]:
    """Each rank's distributed call: from the hooks' records, else its stack, else its traceback."""
    found: dict[int, Activity] = {}
    for trace in ctx.evidence.traces:
        call = _blocked_call(trace.calls) if trace.calls else None
        if trace.rank is not None and call is not None:
            found.setdefault(trace.rank, Activity(trace.rank, trace.node, call, _timed_out(call.error), "hooks"))
    for process in ctx.evidence.processes:
        if process.rank is None or process.rank in found or process.role == "agent":
            continue
        if call := _call_in_stack(process):
            found[process.rank] = Activity(process.rank, process.node, call, False, "stack")
    posted = {trace.rank: trace.calls.posted for trace in ctx.evidence.traces if trace.rank is not None and trace.calls}
    for tb in ctx.tracebacks:
        op = tb.collective()
        if tb.rank is None or tb.rank in found or op == "init_process_group":
            continue
        error = f"{tb.exc_type}: {tb.message}"
        if not op and (direction := GLOO_DIRECTION.search(tb.message)):  # a Work's wait() after isend/irecv
            asynchronous = "irecv" if direction["direction"] == "recv" else "isend"
            call = next((call for call in reversed(posted.get(tb.rank, ())) if call.op == asynchronous), None)
            if call is not None:  # else a collective run from C++ (DDP's buckets), not the job's own p2p
                found[tb.rank] = Activity(tb.rank, tb.node, replace(call, error=error),
                                          bool(TIMED_OUT.search(tb.message)), "hooks")
        elif op:
            found[tb.rank] = Activity(tb.rank, tb.node, DistCall(op, _where(tb.user_frame()), error=error),
                                      bool(TIMED_OUT.search(tb.message)), "traceback")
    if ctx.evidence.timed_out or ctx.evidence.stopped:
        for rank, calls in posted.items():  # a hung rank whose last distributed act was to post isend/irecv
            trace = next(trace for trace in ctx.evidence.traces if trace.rank == rank)
            last_returned = max((call.ended_at or 0 for call in trace.calls.recent), default=0)
            if rank not in found and calls and (calls[-1].entered_at or 0) >= last_returned:
                found[rank] = Activity(rank, trace.node, calls[-1], False, "hooks")
    return {rank: activity for rank, activity in sorted(found.items()) if not _raised_of_its_own(activity)}


def _raised_of_its_own(activity: Activity) -> bool:
    """The call raised an error of the rank's own (pickling, a bad argument), not a wait that ran out or a peer that
    went away: that rank crashed in it, it did not wait; the crash rules speak for it."""
    error = activity.call.error
    return bool(error) and not activity.timed_out and not SYMPTOM.search(error)


def _blocked_call(calls) -> DistCall | None:
    """The call a process was stuck in (pending), or the one that raised last if nothing returned after it."""
    if calls.pending:
        return calls.pending[-1]
    if calls.failed:
        failed = calls.failed[-1]
        later = [call for call in calls.recent if (call.ended_at or 0) > (failed.ended_at or failed.entered_at or 0)]
        return None if later else failed
    return None


def _timed_out(error: str | None) -> bool:
    return bool(error and TIMED_OUT.search(error))


def _where(frame: Frame | None) -> str | None:
    return f"{frame.file.rsplit('/', 1)[-1]}:{frame.line} in {frame.function}" if frame else None


def _call_in_stack(process: ProcessStack) -> DistCall | None:
    """The public c10d function the process's waiting thread stands in, with the arguments its locals give."""
    frame = next((frame for frame in process.frames if frame.file.endswith(C10D_FILE)
                  and not frame.function.startswith("_") and "." not in frame.function), None)
    if frame is None or frame.function == "init_process_group":
        return None
    where = process.waiting()
    number = {name: _number(frame.value(name)) for name in ("src", "dst", "tag")}
    root = number["src"] if frame.function in ROOTED and number["src"] is not None else number["dst"] \
        if frame.function in ROOTED else None
    return DistCall(frame.function, _where(where.user_frame) if where else None,
                    src=number["src"] if frame.function in RECEIVES else None,
                    dst=number["dst"] if frame.function in SENDS else None,
                    tag=number["tag"] if frame.function in POINT_TO_POINT else None, root=root)


def _number(text: str | None) -> int | None:
    return int(text) if text and text.lstrip("-").isdigit() else None


def _world(ctx: Context, activities: dict[int, Activity]) -> list[int]:
    size = max([ctx.evidence.expected_world_size, *(rank + 1 for rank in activities)])
    return list(range(size))


def _members(call: DistCall, world: list[int]) -> tuple[int, ...]:
    return call.group if call.group is not None else tuple(world)


def _listing(activities) -> str:
    return "; ".join(str(activity) for activity in activities)


# ------------------------------------------------------------------------------------------------------------------
# Point to point


DEADLOCK_FIX = ("order the exchange so that one side sends while the other receives: even ranks send first and odd "
                "ranks receive first, or post both without blocking (req = dist.isend(...); dist.recv(...); "
                "req.wait(), or dist.batch_isend_irecv([P2POp(dist.isend, ...), P2POp(dist.irecv, ...)]))")


def point_to_point_findings(ctx: Context, activities: dict[int, Activity]) -> list[Finding]:
    """Blocking sends and receives that wait on each other: a cycle of ranks all receiving (or all sending) first is
    a deadlock; a receive whose peer sends elsewhere, under another tag, or not at all is a mismatch."""
    p2p = {rank: activity for rank, activity in activities.items() if activity.call.op in POINT_TO_POINT}
    if not p2p:
        return []
    world = _world(ctx, activities)
    peers = {rank: _peer(activity, world) for rank, activity in p2p.items()}
    for start in sorted(p2p):
        cycle = _cycle(start, peers)
        if cycle and len({_direction(p2p[rank].call.op) for rank in cycle}) == 1:
            verb = "receive from" if _direction(p2p[cycle[0]].call.op) == "recv" else "send to"
            chain = ", ".join(f"rank {rank} waits to {verb} rank {peers[rank]}" for rank in cycle)
            first = p2p[cycle[0]]
            if verb == "receive from" and len(cycle) > 2 and all(
                    peers[rank] in _sent_to(ctx, rank) for rank in cycle):
                return [Finding(
                    "p2p-mismatch", f"every rank receives from the neighbour it sends to ({chain}, each also sending "
                                    "to that same rank): around a ring the data comes from the other side",
                    _listing(p2p[rank] for rank in cycle), first.node, first.rank,
                    "receive from the neighbour that sends to you: with dst=(rank + 1) % world_size, receive with "
                    "src=(rank - 1) % world_size (or send left and receive from the right)")]
            if phases := _different_phases(ctx, cycle, p2p):
                return [Finding("p2p-deadlock", phases, _listing(p2p[rank] for rank in cycle), first.node, first.rank,
                                COUNTS_DIFFER_FIX)]
            return [Finding(
                "p2p-deadlock", f"the ranks deadlock in point-to-point calls: {chain}; each waits for the other, "
                                f"so none ever {'sends' if verb.startswith('receive') else 'receives'}",
                _listing(p2p[rank] for rank in cycle), first.node, first.rank, DEADLOCK_FIX)]
    for rank, activity in sorted(p2p.items()):
        peer = peers[rank]
        if peer is None:
            continue
        if found := _unmatched(ctx, activity, peer, activities, world):
            return [_rank_zero_as_false(ctx, activity, peer) or found]
    return []


def _can_be_rank_zero(value: ast.AST) -> bool:
    """A rank computed so that it can be 0: the rank itself, one below it (`rank - 1`), or one modulo the world;
    not `rank + 1`, which never is."""
    parts = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
    return any(isinstance(part, ast.Name) and part.id in RANK_NAMES or any(
        isinstance(node, ast.BinOp) and (isinstance(node.op, ast.Mod) or isinstance(node.op, ast.Sub) and holds(
            node.left, RANK_NAMES, RANK_VARIABLES, RANK_CALLS)) and holds(node, RANK_NAMES, RANK_VARIABLES, RANK_CALLS)
        for node in walk(part)) for part in parts)


P2P_CALLS = {"send", "recv", "isend", "irecv", "P2POp", "batch_isend_irecv", "send_object_list", "recv_object_list"}


def _rank_zero_as_false(ctx: Context, activity: Activity, peer: int) -> Finding | None:
    """An exchange with rank 0 that its partner skipped: the partner tests the neighbour's rank for truth (`if left:`
    with `left = rank - 1 if rank > 0 else None`), and where the neighbour is rank 0 the test is false."""
    if 0 not in (activity.rank, peer):
        return None
    for source in parsed_files(ctx):
        ranked = {name for name, value in assignments(source) if _can_be_rank_zero(value)}
        for branch in (node for node in source.walk() if isinstance(node, ast.If)):
            tested = branch.test.operand if isinstance(branch.test, ast.UnaryOp) and isinstance(
                branch.test.op, ast.Not) else branch.test
            if not (isinstance(tested, ast.Name) and tested.id in ranked) or not any(
                    call_name(node) in P2P_CALLS for statement in branch.body for node in walk(statement)):
                continue
            made = next(value for name, value in assignments(source) if name == tested.id)
            skipped = peer if activity.rank == 0 else activity.rank
            return Finding(
                "rank-zero-as-false", f"rank {skipped} skipped its exchange with rank 0: `if {ast.unparse(branch.test)}:` "
                f"({source.name}:{branch.lineno}) tests a neighbour's rank for truth, and 0 is false in Python: where "
                f"the neighbour is rank 0 (`{tested.id} = {ast.unparse(made)[:50]}`) the exchange is skipped, and "
                f"rank {activity.rank} waits for it", str(activity), activity.node,
                activity.rank, f"test for a missing neighbour explicitly: `if {tested.id} is not None:` (or mark "
                "none with -1 and test `>= 0`), never by the rank's truth")
    return None


COUNTS_DIFFER_FIX = ("make both sides run their exchanges the same number of times: compute the count (micro-batches, "
                     "steps, items) by one formula every rank shares, or on one rank and send it (torch.tensor_split(x, "
                     "n) gives exactly n pieces where x.chunk(n) may give fewer); reordering sends and receives does "
                     "not help when one side has more of them")


def _different_phases(ctx: Context, cycle: list[int], p2p: dict[int, Activity]) -> str:
    """Two ranks that each wait to receive from the other at different lines of the job: not an exchange both
    started receive-first, but one rank that left a loop of sends the other still receives in (its count of them
    was smaller). '' where the waits are at one line."""
    if len(cycle) != 2 or len({p2p[rank].call.caller for rank in cycle}) != 2 or \
            any(_direction(p2p[rank].call.op) != "recv" for rank in cycle):
        return ""
    counts = {trace.rank: trace.calls.counts for trace in ctx.evidence.traces if trace.calls and trace.rank in cycle}
    said = "; ".join(f"rank {rank}: {counts[rank].get('send', 0)} sends, {counts[rank].get('recv', 0)} receives"
                     for rank in cycle if rank in counts)
    first, second = cycle
    return (f"rank {first} waits at {p2p[first].call.caller} to receive from rank {second}, and rank {second} waits "
            f"at another line, {p2p[second].call.caller}, to receive from rank {first}: they are in different parts "
            f"of their exchange, so one ran the loop of sends or receives the other still waits in fewer times than "
            f"the other expects" + (f" ({said})" if said else ""))


def _direction(op: str) -> str:
    return "recv" if op in RECEIVES else "send"


def _peer(activity: Activity, world: list[int]) -> int | None:
    """The rank a point-to-point call waits on; with two ranks and no argument known, the other one."""
    if activity.call.peer is not None:
        return activity.call.peer
    others = [rank for rank in world if rank != activity.rank]
    return others[0] if len(others) == 1 else None


def _cycle(start: int, peers: dict[int, int | None]) -> list[int] | None:
    seen: list[int] = []
    rank: int | None = start
    while rank is not None and rank in peers and rank not in seen:
        seen.append(rank)
        rank = peers[rank]
    return seen[seen.index(rank):] if rank in seen and len(seen) > 1 else None


def _unmatched(ctx: Context, activity: Activity, peer: int, activities: dict[int, Activity],
               world: list[int]) -> Finding | None:
    call, rank = activity.call, activity.rank
    receiving = call.op in RECEIVES
    verb, counter = ("receive from", "send to") if receiving else ("send to", "receive from")
    fix = ("make each send and its receive agree: the receiver names the sender (src) and the sender the receiver "
           "(dst), with the same tag and group, in the same order on both sides")
    if peer not in world:
        sentinel = peer < 0 and _no_neighbour_sentinel(ctx)
        return Finding("p2p-mismatch", f"rank {rank} waits to {verb} rank {peer}, which does not exist (the world has "
                                       f"ranks 0..{len(world) - 1})" + (
                           f": the job marks a missing neighbour with {peer} (`{sentinel}`), as MPI's PROC_NULL does, "
                           "but torch.distributed has no null peer and waits for that rank" if sentinel else ""),
                       str(activity), activity.node, rank,
                       "skip the send and the receive where the neighbour is the sentinel (post p2p only to real "
                       "ranks: if left >= 0, if right < world_size), keeping the boundary's own values" if sentinel
                       else "compute the peer from the world size (e.g. (rank + 1) % world_size), and within a subgroup "
                       "pass the group's own ranks (group_src/group_dst) or global ranks consistently")
    other = activities.get(peer)
    if other is None:
        sent = _sent_before_ending(ctx, peer, rank, receiving)
        if sent is None:
            if _left_without_error(ctx, peer):
                half = "send" if receiving else "receive"
                return Finding("p2p-mismatch", f"rank {rank} waits to {verb} rank {peer}, which ended without ever "
                                               f"making that call: the {half} is in code rank {peer} did not run (a "
                                               "condition true on one side only)", str(activity), activity.node, rank,
                               "make the matching call on both sides under the same condition: decide it once (on "
                               "one rank, then broadcast the flag) or send a placeholder (an empty message) when "
                               "there is nothing to send")
            return None
        if any(tb.rank == peer and not echoes_a_peer(tb) for tb in ctx.tracebacks):
            return None  # the peer crashed of its own error before it got there: the crash rules say why
        made, matched = _exchanges(ctx, rank, peer, receiving), _exchanges(ctx, peer, rank, not receiving)
        if call.tensors and sent.tensors and call.tensors != sent.tensors and matched > made:
            return Finding("p2p-mismatch", f"rank {rank} waits to {verb} rank {peer} into "
                                           f"{', '.join(map(str, call.tensors))}, but rank {peer} used "
                                           f"{', '.join(map(str, sent.tensors))} ({sent})", f"{activity}; rank {peer}: "
                                           f"{sent}", activity.node, rank,
                           "give the receiving buffer the sender's shape and dtype: send the shape first (a small "
                           "tensor) and allocate from it, or use send_object_list for data whose size varies")
        if made + 1 > matched and _left_without_error(ctx, peer):
            return Finding("p2p-mismatch", f"rank {rank} waits for its {_ordinal(made + 1)} {call.op} with rank {peer}, "
                                           f"which made only {matched} matching call(s) and ended: the two sides "
                                           "decide how many messages to exchange differently (a condition, a "
                                           "count or a loop of each rank's own)", f"{activity}; rank {peer}: "
                                           f"{matched} x {sent}", activity.node, rank,
                           "make both sides agree on every message: decide the condition or the count once and "
                           "share it (broadcast a flag or the count first), or always send (an empty placeholder "
                           "when there is nothing new)")
        if (call.tag is not None or sent.tag is not None) and (sent.tag or 0) != (call.tag or 0):
            return Finding("p2p-mismatch", f"rank {rank} waits to {verb} rank {peer} with tag {call.tag}, but rank "
                                           f"{peer} used tag {sent.tag} ({sent}) and went on",
                           f"{activity}; rank {peer}: {sent}", activity.node, rank, fix)
        return None
    theirs = other.call
    if theirs.op in POINT_TO_POINT:
        if _direction(theirs.op) == _direction(call.op):
            return None  # both the same way: a deadlock (found above) or a wait on a third rank
        their_peer = _peer(other, world)
        if their_peer is not None and their_peer != rank:
            return Finding("p2p-mismatch", f"rank {rank} waits to {verb} rank {peer}, but rank {peer} waits to "
                                           f"{counter} rank {their_peer}: the pairs do not match",
                           f"{activity}; {other}", activity.node, rank, fix)
        if call.tensors and theirs.tensors and call.tensors != theirs.tensors:
            sent, kept = (theirs, call) if receiving else (call, theirs)
            return Finding("p2p-mismatch", f"rank {rank} and rank {peer} pair up but their tensors differ: the sender "
                                           f"sends {', '.join(map(str, sent.tensors))}, the receiver receives into "
                                           f"{', '.join(map(str, kept.tensors))}", f"{activity}; {other}",
                           activity.node, rank, "give the receiving buffer the sender's shape and dtype: send the "
                           "shape first (a small tensor) and allocate from it, or use send_object_list for data "
                           "whose size varies")
        if (call.tag is not None or theirs.tag is not None) and (call.tag or 0) != (theirs.tag or 0):
            return Finding("p2p-mismatch", f"rank {rank} and rank {peer} never matched: one uses tag {call.tag or 0}, "
                                           f"the other tag {theirs.tag or 0}", f"{activity}; {other}", activity.node,
                           rank, fix)
        if call.group != theirs.group and None not in (call.group, theirs.group):
            return Finding("p2p-mismatch", f"rank {rank} and rank {peer} never matched: their calls run on different "
                                           f"groups ({list(call.group)} vs {list(theirs.group)})",
                           f"{activity}; {other}", activity.node, rank, fix)
        if (activity.timed_out or other.timed_out) and activity.source == other.source == "traceback":
            return Finding("p2p-mismatch", f"rank {rank}'s {call.op} and rank {peer}'s {theirs.op} name each other "
                                           "yet never matched: their tags (or groups) differ",
                           f"{activity}; {other}", activity.node, rank, fix)
        return None
    return Finding("p2p-mismatch", f"rank {rank} waits to {verb} rank {peer}, but rank {peer} is in {theirs.op}"
                                   f"{' at ' + theirs.caller if theirs.caller else ''}: the ranks run their "
                                   "communication in different orders", f"{activity}; {other}", activity.node, rank,
                   "make both ranks make the matching calls in the same order (a send on one rank needs its receive "
                   "on the other before either goes on to a collective)")


def _exchanges(ctx: Context, rank: int, peer: int, receiving: bool) -> int:
    """How many point-to-point calls toward `peer` (receives from it, or sends to it) the rank's hooks saw return."""
    trace = next((trace for trace in ctx.evidence.traces if trace.rank == rank and trace.calls), None)
    wanted = RECEIVES if receiving else SENDS
    return sum(1 for call in (trace.calls.recent if trace else ()) if call.op in wanted and call.peer in (peer, None))


def _ordinal(number: int) -> str:
    return f"{number}{'th' if 10 <= number % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(number % 10, 'th')}"


def _left_without_error(ctx: Context, rank: int) -> bool:
    """The rank's hooks say it ended without an exception, or its node (one process per node) exited 0."""
    trace = next((trace for trace in ctx.evidence.traces if trace.rank == rank), None)
    if trace is not None and trace.calls is not None and trace.ended_without_error:
        return True
    node = next((node for node in ctx.evidence.nodes if node.index == rank), None)
    return ctx.evidence.nproc_per_node == 1 and node is not None and node.exit_code == 0 and trace is not None


def _sent_to(ctx: Context, rank: int) -> set[int]:
    """The peers a rank's hooks saw it send to (posted isends, finished or pending sends)."""
    trace = next((trace for trace in ctx.evidence.traces if trace.rank == rank and trace.calls), None)
    calls = (trace.calls.posted + trace.calls.recent + trace.calls.pending) if trace else ()
    return {call.dst for call in calls if call.op in SENDS and call.dst is not None}


def _sent_before_ending(ctx: Context, peer: int, rank: int, receiving: bool) -> DistCall | None:
    """The last point-to-point call toward `rank` that `peer`, which is in no call, made before it went on."""
    wanted = SENDS if receiving else RECEIVES
    for trace in ctx.evidence.traces:
        if trace.rank == peer and trace.calls:
            for call in reversed(trace.calls.recent + trace.calls.posted):
                if call.op in wanted and call.peer in (rank, None):
                    return call
    return None


# ------------------------------------------------------------------------------------------------------------------
# Collectives whose arguments differ


def root_findings(ctx: Context, activities: dict[int, Activity]) -> list[Finding]:
    """A rooted collective (broadcast, reduce, gather, scatter) whose root differs between the ranks."""
    world = _world(ctx, activities)
    by_call: dict[tuple, list[Activity]] = {}
    for activity in activities.values():
        if activity.call.op in ROOTED and activity.call.root is not None:
            by_call.setdefault((activity.call.op, _members(activity.call, world)), []).append(activity)
    if not by_call:
        return _every_rank_a_root(ctx, activities, world)
    for (op, _), same in sorted(by_call.items()):
        roots = Counter(activity.call.root for activity in same)
        if len(roots) > 1:
            usual = roots.most_common(1)[0][0] if len(set(roots.values())) > 1 else min(roots)
            odd = next(activity for activity in same if activity.call.root != usual)
            said = ", ".join(f"rank {activity.rank} root {activity.call.root}" for activity in same)
            return [Finding(
                "root-mismatch", f"the ranks passed different roots to {op} ({said}): each waits for a root the "
                                 "others do not use", _listing(same), odd.node, odd.rank,
                f"pass the same root to {op} on every rank: the global rank that holds the data (a constant such as "
                "0, or one agreed value), not one computed per rank or per node (rank - local_rank names a "
                "different rank on each node); within a subgroup, a member's global rank (or group_src=)")]
    return []


def _every_rank_a_root(ctx: Context, activities: dict[int, Activity], world: list[int]) -> list[Finding]:
    """Without the calls' arguments: of two ranks both in a broadcast or scatter, one timed out *sending* (gloo's
    words): only the root sends, so it took itself for the root while the other did not receive from it."""
    rooted = [activity for activity in activities.values() if activity.call.op in ("broadcast", "scatter")]
    sending = [activity for activity in rooted if activity.timed_out and activity.call.error
               and (found := GLOO_DIRECTION.search(activity.call.error)) and found["direction"] == "send"]
    if len(world) != 2 or len(rooted) != 2 or len({a.call.op for a in rooted}) != 1 or not sending:
        return []
    op = rooted[0].call.op
    return [Finding(
        "root-mismatch", f"rank {sending[0].rank} acted as the root of {op} (it timed out sending, and only the root "
                         f"sends) while the other rank did not receive from it: they passed different roots",
        _listing(rooted), sending[0].node, sending[0].rank, ROOT_FIX.format(op=op))]


ROOT_FIX = ("pass the same root to {op} on every rank: the global rank that holds the data (a constant such as 0, or one "
            "agreed value), not one computed per rank or per node (rank - local_rank names a different rank on each "
            "node); within a subgroup, a member's global rank (or group_src=)")


def _one_partition(made: dict[int, DistCall]) -> bool:
    """new_subgroups returns each rank its own subgroup, so they differ by design: they agree when each rank's holds
    it and is the one every other member of it got."""
    return all(call.op in GROUP_CREATION[1:] and call.group and rank in call.group
               and all(made[other].group == call.group for other in call.group if other in made)
               for rank, call in made.items())


def group_findings(ctx: Context, activities: dict[int, Activity]) -> list[Finding]:
    """Subgroups that differ: the ranks created them with different members, a rank waits in new_group that another
    never calls, or ranks meet in one collective on groups with other members."""
    world = _world(ctx, activities)
    created = {trace.rank: [call for call in trace.calls.groups if call.op in GROUP_CREATION]
               for trace in ctx.evidence.traces if trace.rank is not None and trace.calls}
    if len(created) > 1:
        longest = max(len(calls) for calls in created.values())
        for index in range(longest):
            made = {rank: calls[index] for rank, calls in created.items() if index < len(calls)}
            members = Counter(call.group for call in made.values())
            if len(members) > 1 and not _one_partition(made):
                usual = members.most_common(1)[0][0] if len(set(members.values())) > 1 else None
                odd_rank = next(rank for rank, call in sorted(made.items()) if usual is None or call.group != usual)
                said = "; ".join(f"rank {rank}: new_group({list(call.group) if call.group else 'all'})"
                                 + (f" at {call.caller}" if call.caller else "") for rank, call in sorted(made.items()))
                local = _members_only_creation(ctx)
                return [Finding(
                    "group-mismatch", f"the ranks created their subgroup #{index + 1} with different members: every "
                                      "rank must call new_group with the same ranks, in the same order" + (
                        f" (new_group(..., use_local_synchronization=True) at {local}: only the members call it, so a "
                        "rank that sat out one group counts and names its later groups differently)" if local else ""),
                    said, node_of_rank(ctx, odd_rank), odd_rank,
                    ("drop use_local_synchronization and " if local else "") + GROUP_FIX)]
    if len(created) > 1 and len({len(calls) for calls in created.values()}) > 1:
        most = max(len(calls) for calls in created.values())
        fewer = sorted(rank for rank, calls in created.items() if len(calls) < most)
        maker = next(rank for rank, calls in sorted(created.items()) if len(calls) == most)
        call = created[maker][len(created[fewer[0]])]
        return [Finding(
            "group-mismatch", f"rank {maker} created a subgroup ({call}) that {_ranks_list(fewer)} never created: "
                              "every rank must call new_group, members or not", "; ".join(
                f"rank {rank}: {len(calls)} new_group call(s)" for rank, calls in sorted(created.items())),
            node_of_rank(ctx, maker), maker, GROUP_FIX)]
    in_creation = [activity for activity in activities.values() if activity.call.op in GROUP_CREATION
                   and not (activity.timed_out and (_timeout_seconds(activity, ctx) or SHORT_ANYWAY) < SHORT_ANYWAY)]
    elsewhere = [activity for activity in activities.values() if activity.call.op not in GROUP_CREATION]
    if in_creation and elsewhere:
        first = in_creation[0]
        return [Finding(
            "group-mismatch", f"rank {first.rank} waits in {first.call.op}, which every rank must call (members or "
                              f"not), while {_ranks_text(elsewhere)} went on without it",
            _listing(activities.values()), first.node, first.rank, GROUP_FIX)]
    named = [activity for activity in activities.values() if activity.call.group_name is not None
             and activity.call.op not in POINT_TO_POINT + GROUP_CREATION]
    by_members: dict[tuple, set[str]] = {}
    for activity in named:
        by_members.setdefault((activity.call.op, activity.call.group), set()).add(activity.call.group_name)
    for (op, members), names in sorted(by_members.items()):
        if len(names) > 1:
            same = [activity for activity in named if (activity.call.op, activity.call.group) == (op, members)]
            said = ", ".join(f"rank {a.rank} on its subgroup #{a.call.group_name}" for a in same)
            return [Finding(
                "group-mismatch", f"the ranks run {op} on different subgroups with the same members {list(members)} "
                                  f"({said}): they created their subgroups in another order",
                _listing(same), same[0].node, same[0].rank,
                "create the subgroups in the same order on every rank (iterate a fixed, sorted list of names, not a "
                "set, a dict built per rank or a config read per node), and use the group made for that purpose")]
    collective = [activity for activity in activities.values()
                  if activity.call.op not in POINT_TO_POINT + GROUP_CREATION and activity.call.group is not None]
    if collective:
        by_op: dict[str, set[tuple[int, ...]]] = {}
        for activity in activities.values():
            by_op.setdefault(activity.call.op, set()).add(_members(activity.call, world))
        for op, groups in sorted(by_op.items()):
            same = [activity for activity in activities.values() if activity.call.op == op]
            apart = sum(len(group) for group in groups) == len(set().union(*groups)) and all(
                activity.rank in _members(activity.call, world) for activity in same)
            if len(groups) > 1 and not apart:  # disjoint groups, each rank in its own: subgroups working side by side
                odd = min(same, key=lambda activity: len(_members(activity.call, world)))
                return [Finding(
                    "group-mismatch", f"the ranks run {op} on groups with different members "
                                      f"({' vs '.join(str(list(group)) for group in sorted(groups))})",
                    _listing(same), odd.node, odd.rank, GROUP_FIX)]
    return []


GROUP_FIX = ("create every subgroup on every rank with the same ranks list, in the same order (new_group must be "
             "called by all ranks, members or not: compute the lists from the world size, not from each rank's own "
             "view), and run each collective on the same group object on all of its members")


def _members_only_creation(ctx: Context) -> str | None:
    """Where the job creates a group that only its members call (use_local_synchronization=True), as file:line."""
    for source in parsed_files(ctx):
        for call in (node for node in source.walk() if call_name(node) == "new_group"):
            if any(item.arg == "use_local_synchronization" and not (isinstance(item.value, ast.Constant)
                                                                  and not item.value.value) for item in call.keywords):
                return f"{source.name}:{call.lineno}"
    return None


def _ranks_list(ranks: list[int]) -> str:
    return " and ".join(f"rank {rank}" for rank in ranks)


def _ranks_text(activities) -> str:
    return " and ".join(f"rank {activity.rank} ({activity.call.op})" for activity in activities)


def member_elsewhere_findings(ctx: Context, activities: dict[int, Activity]) -> list[Finding]:
    """A rank waits in a collective on a subgroup while another member of that group is in another call: that member
    made fewer calls on the group (it skipped one), whatever the ranks outside the group were doing."""
    for activity in activities.values():
        call = activity.call
        if call.group is None or call.op in POINT_TO_POINT + GROUP_CREATION:
            continue
        for member in call.group:
            other = activities.get(member)
            if member == activity.rank or other is None or (other.call.op, other.call.group) == (call.op, call.group):
                continue
            if _waits_on_a_crash(ctx, other, _world(ctx, activities)):
                continue  # not past this call: held up before it by a rank that crashed (the crash rules say which)
            mine, theirs = _calls_on_group(ctx, activity.rank, call), _calls_on_group(ctx, member, call)
            at = f" at {other.call.caller}" if other.call.caller else ""
            return [Finding(
                "collective-mismatch", f"rank {activity.rank} waits in its {_ordinal(mine + 1)} {call.op} on group "
                                       f"{list(call.group)}, but rank {member}, a member of that group, went on to "
                                       f"{other.call.op}{at} after {theirs}: it skipped one",
                f"{activity}; {other}", activity.node, activity.rank,
                f"every member of a group must make the same calls on it: a member with nothing to add this step (no "
                f"tokens routed to it, an empty batch) still joins the {call.op}, with zeros, or the members agree "
                "first (all_reduce a flag) to skip it together")]
    return []


def _waits_on_a_crash(ctx: Context, activity: Activity, world: list[int]) -> bool:
    """The call `activity` waits in has a member that ended with an error of its own (not a peer's echoed back)."""
    crashed = {tb.rank for tb in ctx.tracebacks if tb.rank is not None and not echoes_a_peer(tb)}
    return bool(crashed & (set(_members(activity.call, world)) - {activity.rank}))


def _calls_on_group(ctx: Context, rank: int, call: DistCall) -> int:
    trace = next((trace for trace in ctx.evidence.traces if trace.rank == rank and trace.calls), None)
    return sum(1 for done in (trace.calls.recent if trace else ()) if (done.op, done.group) == (call.op, call.group))


def call_mismatch_findings(ctx: Context, activities: dict[int, Activity]) -> list[Finding]:
    """Members of one group in different collectives, or in one with tensors of other shapes or dtypes, as the hooks
    saw the calls (with the user's line of each)."""
    world = _world(ctx, activities)
    hooked = [activity for activity in activities.values() if activity.source == "hooks"
              and activity.call.op not in POINT_TO_POINT + GROUP_CREATION + ("init_process_group",)]
    by_group: dict[tuple[int, ...], list[Activity]] = {}
    for activity in hooked:
        by_group.setdefault(_members(activity.call, world), []).append(activity)
    for members, same in sorted(by_group.items()):
        if len(same) < 2:
            continue
        ops = Counter(activity.call.op for activity in same)
        if len(ops) > 1:
            odd = _odd(same, lambda activity: activity.call.op)
            return [Finding("collective-mismatch", "the ranks wait in different collectives: "
                                                   + ", ".join(f"rank {a.rank} in {a.call.op}" for a in same),
                            _listing(same), odd.node, odd.rank,
                            "make every rank call the same collectives in the same order; a collective inside "
                            "`if rank == ...` or a loop whose length differs per rank is the usual culprit")]
        tensors = Counter(activity.call.tensors for activity in same if activity.call.tensors)
        if len({tuple(len(tensor.shape) for tensor in key) for key in tensors}) > 1:
            continue  # other numbers of dimensions: different calls met (out of step), not one call's sizes
        lengths = {a.rank: a.call.object_list_length for a in same}
        if None not in lengths.values() and len(set(lengths.values())) > 1:
            # broadcast_object_list / all_gather_object: lists of other lengths never pair their sizes
            odd = _odd(same, lambda activity: lengths[activity.rank])
            return [Finding("collective-list-length", f"the ranks passed lists of different lengths to "
                            f"{same[0].call.op}: " + ", ".join(f"rank {rank} {length} object(s)"
                                                               for rank, length in lengths.items()),
                            _listing(same), odd.node, odd.rank,
                            f"give {same[0].call.op} a list of the same length on every rank (the receivers' "
                            "[None] * N with the N the source sends; agree on N first, e.g. broadcast it)")]
        if len(tensors) > 1:
            odd = _odd(same, lambda activity: activity.call.tensors)
            return [Finding("shape-mismatch", f"the ranks passed different tensors to {same[0].call.op}: "
                                              + ", ".join(f"rank {a.rank} {', '.join(map(str, a.call.tensors))}"
                                                          for a in same),
                            _listing(same), odd.node, odd.rank,
                            "make every rank pass the same shape and dtype to each collective (pad or drop the uneven "
                            "last batch, e.g. DistributedSampler(drop_last=True); cast to one dtype before it)")]
    return []


def handled_error_findings(ctx: Context, activities: dict[int, Activity]) -> list[Finding]:
    """A rank waits in a collective it called while handling an exception (an except or finally block; the hooks keep
    the exception), and the other ranks are elsewhere: the exception, often never printed, is where the run went
    wrong, and the collective in its handler is why it hangs instead of ending."""
    files = parsed_files(ctx)
    for rank, activity in activities.items():
        call = activity.call
        handler = _handler_of(files, [call.caller] + _callers_of(ctx, rank))
        if not (call.handling or handler):
            continue
        others = [other for other in activities.values() if other.rank != rank]
        if others and all(other.call.op == call.op and other.call.caller == call.caller for other in others):
            continue  # every rank handles it in the same call: they agree, whatever they handle
        printed = next((tb for tb in ctx.tracebacks if tb.rank == rank), None)
        error = call.handling or (f"{printed.short_type}: {printed.message}" if printed else None)
        at = call.handling_raised_at or (_where(printed.user_frame()) if printed and not call.handling else None)
        raised = f"raised {error[:160]}" + (f" at {at}" if at else "") if error else "raised an exception"
        states = rank_states(ctx, activities)
        elsewhere = "; ".join(states[other] for other in sorted(states) if other != rank) or "none seen"
        return [Finding(
            "collective-while-handling-error", f"rank {rank} {raised} and, while handling it"
            + (f" in its {handler}" if handler else "") + f", called {call.op} at {call.caller}; the other ranks "
            f"went on: {elsewhere}",
            _listing(activities.values()), activity.node, rank,
            "the exception is the cause: fix what raised it (its message above); and run no collective in an except "
            "or finally block that only some ranks enter: let the error end the process (torchrun then stops the "
            "others and reports it), or agree on failure first on every rank (an all_reduce of an ok-flag each "
            "step) before any rescue save or barrier")]
    return []


def _callers_of(ctx: Context, rank: int) -> list[str]:
    """'train.py:73 in train' for each frame of the rank's waiting thread (py-spy's stack), innermost first."""
    process = next((process for process in ctx.evidence.processes if process.rank == rank and process.role != "agent"),
                   None)
    return [f"{frame.file}:{frame.line} in {frame.function}" for frame in reversed(process.frames)] if process else []


def _handler_of(files, callers: list[str | None]) -> str | None:
    """The except or finally block of the job's code that one of `callers` ('train.py:41 in step', innermost first)
    runs in: the call itself, or a function up its stack."""
    for caller in callers:
        found = re.match(r"(?P<file>[^:]+):(?P<line>\d+)", caller or "")
        source = source_named(files, found["file"]) if found else None
        if source and (handler := source.handler_at(int(found["line"]))):
            return handler + (f" at {source.name}" if caller != callers[0] else "")
    return None


def _odd(activities: list[Activity], key) -> Activity:
    counts = Counter(key(activity) for activity in activities)
    fewest = min(counts.values())
    return next(activity for activity in activities if counts[key(activity)] == fewest)


# ------------------------------------------------------------------------------------------------------------------
# A timeout every rank met together


SHORT_FOR_BYTES = 1e8  # bytes per second: a timeout under 10x the time to move the tensor at this rate is too short
SHORT_ANYWAY = 1.0  # seconds: a collective's timeout shorter than this is too short for any real job


def timeout_findings(ctx: Context, activities: dict[int, Activity]) -> list[Finding]:
    """A call that gave up after a timeout no real transfer fits in (under a second), or a collective every member of
    the group entered alike, with the same arguments, that still timed out sooner than its bytes could move: nobody
    was missing, so the timeout was too short (not a peer that never came)."""
    world = _world(ctx, activities)
    timed_out = [activity for activity in activities.values() if activity.timed_out]
    if not timed_out:
        return []
    seconds = {activity.rank: _timeout_seconds(activity, ctx) for activity in timed_out}
    hasty = [activity for activity in timed_out if seconds[activity.rank] is not None
             and seconds[activity.rank] < SHORT_ANYWAY]
    call = (hasty or timed_out)[0].call
    members = _members(call, world)
    there = [activities.get(rank) for rank in members]
    alike = all(activity is not None and _same_call(activity.call, call) for activity in there)
    if call.op in POINT_TO_POINT and (len(there) != len(world) or any(a.source != "hooks" for a in there if a)):
        alike = False  # a pair that names each other: matched only when their tags and peers are known
    timeout = seconds[(hasty or timed_out)[0].rank]
    size = sum(_bytes(tensor) for tensor in call.tensors) or _flight_bytes(ctx, call)
    too_short = timeout is not None and (timeout < SHORT_ANYWAY or (alike and size and
                                                                     timeout < 10 * size / SHORT_FOR_BYTES))
    if not too_short or not (alike or hasty):
        return []
    first = (hasty or timed_out)[0]
    if timeout is not None and timeout < SHORT_ANYWAY and call.op == "init_process_group":
        return [Finding(
            "timeout-too-short", f"the process group's timeout is {timeout:g} s ({timeout * 1000:g} ms), and "
            f"{call.op} gave up before the ranks could even connect: a timeout meant in seconds was given in "
            "milliseconds (timedelta(milliseconds=N), or a number of seconds divided by 1000)",
            _listing(there if alike else timed_out), first.node, first.rank,
            "pass the timeout in seconds: timeout=datetime.timedelta(seconds=N) (with N read as a number of seconds, "
            "e.g. float(os.environ['PG_TIMEOUT'])); a group's timeout bounds every wait of its calls, so seconds to "
            "minutes, never milliseconds")]
    amount = f" {size / 1e6:.0f} MB" if size >= 1e6 else f" {size} bytes" if size else ""
    title = (f"every rank entered {call.op} alike and it still timed out after {timeout:g} s: the timeout is shorter "
             f"than moving{amount or ' the data'} between the nodes" if alike else
             f"rank {first.rank}'s {call.op} gave up after {timeout:g} s: a timeout far shorter than any exchange "
             "between nodes takes (the other ranks' errors follow from it)")
    return [Finding(
        "timeout-too-short", title, _listing(there if alike else timed_out), first.node, first.rank,
        "give the process group (or the new_group it runs on) a timeout that covers the largest transfer with room to "
        "spare (timeout=datetime.timedelta(minutes=...); the default is 10-30 minutes), or send less at once (split "
        "the tensor into chunks, compress it); keep short timeouts for detecting a missing rank, not for big "
        "transfers")]


def _same_call(one: DistCall, other: DistCall) -> bool:
    return (one.op, one.group, one.tensors, one.root) == (other.op, other.group, other.tensors, other.root)


def _timeout_seconds(activity: Activity, ctx: Context) -> float | None:
    """The timeout a call gave up after: the group's (hooks), else the one gloo's or the store's message names."""
    if activity.call.timeout_s:
        return activity.call.timeout_s
    if activity.call.error and (found := WAITED_MS.search(activity.call.error)):
        return int(found["ms"]) / 1000
    for tb in ctx.tracebacks:
        if tb.rank == activity.rank and tb.collective() == activity.call.op and (found := WAITED_MS.search(tb.message)):
            return int(found["ms"]) / 1000
    return None


DTYPE_BYTES = {"float64": 8, "double": 8, "int64": 8, "long": 8, "complex64": 8, "float32": 4, "float": 4, "int32": 4,
               "int": 4, "float16": 2, "half": 2, "bfloat16": 2, "int16": 2, "uint8": 1, "int8": 1, "bool": 1}


def _bytes(tensor) -> int:
    return _size_in_bytes(tensor.shape, tensor.dtype.removeprefix("torch."))


def _size_in_bytes(shape, dtype: str) -> int:
    count = 1
    for size in shape:
        count *= size
    return count * DTYPE_BYTES.get(dtype.lower(), 4)


def _flight_bytes(ctx: Context, call: DistCall) -> int:
    """The bytes of the last collective of that operation in any rank's Flight Recorder (the default group's)."""
    for trace in ctx.evidence.traces:
        for collective in reversed(trace.history):
            if collective.operation == call.op:
                return sum(_size_in_bytes(shape, dtype) for shape, dtype in zip(collective.sizes, collective.dtypes))
    return 0


# ------------------------------------------------------------------------------------------------------------------
# Store keys


DIGITS = re.compile(r"\d+")  # keys that differ only in numbers are other ranks' or steps' keys, not a misspelling


def store_server_findings(ctx: Context) -> list[Finding]:
    """A TCPStore the user's code built as its server (is_master) with a world_size larger than the processes the
    job has: the constructor waits for that many clients, so the rank never gets past it."""
    for trace in ctx.evidence.traces:
        blocked = _blocked_store_server(trace)
        if blocked is None:
            continue
        size = int(blocked.argument("world_size"))
        launched = ctx.evidence.expected_world_size
        if size <= launched:
            continue
        how = "failed waiting" if blocked.error else "was still waiting"
        return [Finding(
            "world-size-mismatch", f"rank {trace.rank} built a TCPStore server for world_size={size} at "
            f"{blocked.caller} and {how} for {size} clients: the job has {launched} processes, so its other ranks "
            f"wait in vain for what rank {trace.rank} would do after it",
            f"rank {trace.rank}: TCPStore({', '.join(f'{name}={value}' for name, value in blocked.args)})"
            + (f" raised {blocked.error[:160]}" if blocked.error else " pending"), trace.node, trace.rank,
            f"give the store the number of processes that connect to it, the server's own included: world_size="
            f"{launched} here (dist.get_world_size(), or int(os.environ['WORLD_SIZE'])), or world_size=None with "
            "wait_for_workers=False")]
    return []


def _blocked_store_server(trace) -> DistCall | None:
    """The TCPStore server this process was building when it ended or was asked (pending, or failed waiting)."""
    if trace.calls is None:
        return None
    for call in (*trace.calls.pending, *trace.calls.failed):
        if (call.op == "TCPStore" and call.argument("is_master") == "True"
                and (call.argument("world_size") or "").isdigit()):
            return call
    return None


def store_counter_findings(ctx: Context) -> list[Finding]:
    """A counter on the store (store.add) that the ranks read while they waited for it to reach the world size, and
    that had gone past it: its key still held an earlier round's count."""
    world = ctx.evidence.expected_world_size
    highest: dict[str, tuple[int, int | None, int | None, StoreOp]] = {}
    reads: dict[str, int] = {}
    for trace in ctx.evidence.traces:
        last: dict[str, int] = {}
        for op in trace.calls.store if trace.calls else ():
            for key in op.keys:
                if op.op == "add" and op.value is not None:
                    if key not in highest or op.value > highest[key][0]:
                        highest[key] = (op.value, trace.rank, trace.node, op)
                    polled = last.get(key) == op.value  # add(key, 0): a read of a counter that did not move
                    last[key] = op.value
                else:
                    polled = op.waits
                if polled:
                    reads[key] = reads.get(key, 0) + 1
    for key, (value, rank, node, op) in highest.items():
        if world and value > world and reads.get(key, 0) >= 2:
            return [Finding(
                "store-counter-reused", f"the store counter '{key}' reads {value} with {world} ranks: its key still "
                f"holds an earlier round's count (store.add adds to it), so a wait for it to reach {world} never ends",
                f"rank {rank}: add('{key}') returned {value}" + (f" at {op.caller}" if op.caller else ""), node, rank,
                f"give each round its own key (f'{key}/{{epoch}}'), or wait until the count reaches {world} x the "
                "rounds so far, or use dist.barrier() (monitored_barrier names a rank that does not come)")]
    return []


def store_findings(ctx: Context) -> list[Finding]:
    """A store key a rank waited for (get/wait) until its timeout, which no rank set: the nearest key set instead."""
    if any(_blocked_store_server(trace) for trace in ctx.evidence.traces):
        return []  # the would-be setter never got past building the store: store_server_findings
    sets: dict[str, list[int]] = {}
    stores: dict[str, set[str | None]] = {}  # the kinds of store each key was set on
    waits: list[tuple[int | None, int | None, StoreOp]] = []
    for trace in ctx.evidence.traces:
        rank = trace.rank if trace.rank is not None or ctx.evidence.nproc_per_node != 1 else trace.node
        for op in trace.calls.store if trace.calls else ():
            if op.waits and (op.ended_at is None or op.error):  # still waiting, timed out, or its server went away
                waits.append((rank, trace.node, op))
            elif not op.waits and op.op not in ("check", "delete_key"):
                for key in op.keys:
                    sets.setdefault(key, []).append(rank)
                    stores.setdefault(key, set()).add(op.store)
    if not sets and not waits:
        return _store_wait_in_the_logs(ctx)
    for rank, node, op in waits:  # the same name on another kind of store: a PrefixStore's keys are other keys
        for key in op.keys:
            if key in sets and op.store not in stores[key] and "PrefixStore" in stores[key] | {op.store}:
                where = f" at {op.caller}" if op.caller else ""
                setters = " and ".join(f"rank {setter}" for setter in sorted(set(sets[key]), key=str))
                return [Finding(
                    "store-key-never-set", f"rank {rank} waited for the store key '{key}'{where} on a {op.store}, "
                                           f"while {setters} set '{key}' on a "
                                           f"{' / '.join(sorted(str(kind) for kind in stores[key]))}: a PrefixStore "
                                           "puts its prefix before every key, so these are two different keys",
                    f"rank {rank}: {op.op}({list(op.keys)}) on {op.store}; {setters}: set on "
                    f"{', '.join(sorted(str(kind) for kind in stores[key]))}", node, rank,
                    "read and write through the same store object: wrap the store in the same PrefixStore on every "
                    "rank (same prefix), or use the bare store on both sides")]
    for rank, node, op in waits:  # set by another rank, never seen by this one: they were not on one store
        for key in op.keys:
            others = sorted({setter for setter in sets.get(key, []) if setter != rank}, key=str)
            if others and op.ended_at is not None:
                file_store = op.store == "FileStore" or "Timeout waiting for key" in (op.error or "")
                where = f" at {op.caller}" if op.caller else ""
                return [Finding(
                    "store-key-never-set", f"rank {rank} waited for the store key '{key}'{where}, which "
                                           f"{' and '.join(f'rank {other}' for other in others)} set, and never saw it: "
                                           + ("each node's FileStore file is its own, not one shared file" if file_store
                                              else "the ranks set and read it on different stores (another host, "
                                                   "port or prefix)"), f"rank {rank}: {op.op}({list(op.keys)}) "
                    f"timed out; rank {others[0]} set '{key}'", node, rank,
                    "put the FileStore's file on a folder every node shares (the lab's /lab/shared, a network "
                    "filesystem), or use a TCPStore on one host that every rank dials" if file_store else
                    "give every rank the same store: the same host and port (MASTER_ADDR, not each node's own "
                    "address), created with is_master=True on one rank only, and the same PrefixStore prefix")]
    candidates = []
    for rank, node, op in waits:
        for key in op.keys:
            if key not in sets:
                spelled = [name for name in difflib.get_close_matches(key, list(sets), n=3, cutoff=0.6)
                           if DIGITS.sub("#", name) != DIGITS.sub("#", key)]
                candidates.append((not spelled, op.at or 0, rank, node, op, key, spelled[:1]))
                break
    for _, _, rank, node, op, key, nearest in sorted(candidates, key=lambda found: found[:2]):
        where = f" at {op.caller}" if op.caller else ""
        if nearest:
            setters = " and ".join(f"rank {setter}" for setter in sorted(set(sets[nearest[0]]), key=str))
            title = (f"rank {rank} waited for the store key '{key}'{where}, which no rank set; {setters} set "
                     f"'{nearest[0]}' instead")
        elif len(waiters := {other for other, _, other_op in waits if key in other_op.keys}) > 1 and \
                len(waiters) >= len({trace.rank for trace in ctx.evidence.traces if trace.calls}):
            return [Finding(
                "store-key-never-set", f"every rank waited for the store key '{key}'{where} and none set it: the "
                                       "code that sets it ran on no rank (the condition that picks the rank to set "
                                       "it, such as a hostname, a variable or a file, held on none)",
                f"{', '.join(f'rank {other}' for other in sorted(waiters, key=str))}: {op.op}({list(op.keys)}) timed out; "
                "no rank set it", node, rank,
                "choose the rank that sets it by its rank (`if rank == 0: store.set(...)`), which every job has, not by "
                "a hostname, a node's variable or a file that may hold on no node (or on several)")]
        else:
            title = f"rank {rank} waited for the store key '{key}'{where}, which no rank set"
        said = "; ".join(f"rank {setter} set '{name}'" for name, setters in sets.items() for setter in setters)
        return [Finding(
            "store-key-never-set", title, f"rank {rank}: {op.op}({list(op.keys)}) " +
            ("timed out" if op.ended_at else "still waiting") + (f"; {said}" if said else "; no rank set any key"),
            node, rank,
            "set and wait for the very same key: build its name in one place both sides call (a constant or a "
            "function of the epoch/step), on the same store (host, port and PrefixStore prefix); if the name is "
            "right, the rank meant to set it never got there: see where it was")]
    return []


# torch's own keys (gloo's rendezvous, the store barrier, torchrun's rendezvous): not a key the job chose
INTERNAL_KEY = re.compile(r"^/?(?:default_pg/|\d+//|torchelastic/|rdzv|store_based_barrier_key|init/|/?\d+/cpu/)")
STORE_WAIT_KEYS = re.compile(r"wait timeout after (?P<ms>\d+)ms, keys: (?P<keys>.+)$"
                             r"|Timeout waiting for key: (?P<key>\S+) after (?P<ms2>\d+) ?ms")  # TCPStore's, FileStore's


def _store_wait_in_the_logs(ctx: Context) -> list[Finding]:
    """Without the hooks' record: a store wait that timed out on keys the job chose (not torch's own), a key standing
    alone before keys that differ only in a number (a per-rank barrier the stuck rank never reached)."""
    waits = []
    for tb in ctx.tracebacks:
        if (found := STORE_WAIT_KEYS.search(tb.message)) and (found["keys"] or found["key"]):
            keys = [key.strip().lstrip("/") for key in (found["keys"] or found["key"]).split(",")]
            if not any(INTERNAL_KEY.match(key) for key in keys):
                family = len({DIGITS.sub("#", key) for key in keys}) < len(keys)
                waits.append((family, tb, keys, int(found["ms"] or found["ms2"]) / 1000, bool(found["key"])))
    if not waits:
        return []
    family, tb, keys, seconds, file_store = min(waits, key=lambda wait: wait[0])
    frame = tb.user_frame()
    where = f" at {frame.file.rsplit('/', 1)[-1]}:{frame.line}" if frame else ""
    waiting = {wait[1].rank for wait in waits if wait[4]}
    if file_store and ctx.multi_node and len(waiting) > 1:  # every rank waited for keys the others set: apart
        return [Finding(
            "store-key-never-set", f"{' and '.join(f'rank {rank}' for rank in sorted(waiting, key=str))} each waited "
                                   f"for keys the others set on a FileStore (rank {tb.rank} for '{keys[0]}'{where}), "
                                   "and none arrived: each node's FileStore file is its own, not one shared file",
            f"{tb.line.where()}: {tb.exc_type}: {tb.message}"[:400], tb.node, tb.rank,
            "put the FileStore's file on a folder every node shares (the lab's /lab/shared, a network filesystem), "
            "or use a TCPStore on one host that every rank dials")]
    return [Finding(
        "store-key-never-set", f"rank {tb.rank} waited {seconds:g} s for the store key '{keys[0]}'{where}, which no "
                               "rank set in that time", f"{tb.line.where()}: {tb.exc_type}: {tb.message}"[:400],
        tb.node, tb.rank,
        "set and wait for the very same key: build its name in one place both sides call, on the same store (host, "
        "port, PrefixStore prefix); if the name is right, the rank meant to set it never got there (its lines say "
        "where it was)")]


# ------------------------------------------------------------------------------------------------------------------
# A rank waiting for its DataLoader worker


DATALOADER_FILE = "torch/utils/data/"
WORKER_LOOP = "_worker_loop"
IDLE_FILES = ("multiprocessing/", "/queue.py", "/threading.py", "/selectors.py")  # a worker waiting for work


def dataloader_findings(ctx: Context) -> list[Finding]:
    """A rank waits in the DataLoader for its next batch while one of its worker processes is busy in the dataset's
    code (or stuck anywhere but waiting for work): the rank cannot reach its next collective."""
    processes = ctx.evidence.processes
    pids = {process.pid for process in processes}
    for rank_process in processes:
        if rank_process.role == "agent" or not any(DATALOADER_FILE in (frame.short_file or frame.file)
                                                   for frame in rank_process.frames):
            continue
        if rank_process.rank is None:  # lab exec: one process per node is its rank, whatever it started
            if ctx.evidence.nproc_per_node != 1 or rank_process.ppid in pids:
                continue
            rank_process = replace(rank_process, rank=rank_process.node)
        for child in processes:
            if child.ppid != rank_process.pid or child.node != rank_process.node or child is rank_process:
                continue
            stuck = _worker_busy_frame(child)
            if stuck is None or _producing(ctx, stuck):
                continue
            waiting = rank_process.waiting()
            at = f" ({waiting.user_frame.location})" if waiting and waiting.user_frame else ""
            others = _others_waiting(ctx, rank_process.rank)
            return [Finding(
                "dataloader-worker-stuck",
                f"rank {rank_process.rank}'s DataLoader worker (pid {child.pid} on node{child.node}) is stuck in "
                f"{stuck.function} ({stuck.location}): rank {rank_process.rank} waits for its next batch{at}"
                + (f" while {others}" if others else ""),
                f"worker pid {child.pid}: {' <- '.join(f'{frame.function} ({frame.location})' for frame in _inner(child))}",
                rank_process.node, rank_process.rank,
                f"find why the dataset's code blocks in {stuck.function}: a lock or thread state copied into the "
                "worker by fork (take locks and start threads after the DataLoader's workers start, or use "
                "multiprocessing_context='spawn'), a read from a network or file that never returns, a queue nobody "
                "fills; DataLoader(timeout=SECONDS) makes a stuck worker raise instead of hanging, and num_workers=0 "
                "runs the same code in the rank to debug it")]
    return []


def _producing(ctx: Context, frame: Frame) -> bool:
    """The worker is inside the __iter__ of an IterableDataset that never ends: producing batches, not stuck (the
    loop over it is the finding: sources.py, loop-over-endless-stream)."""
    return frame.function.endswith("__iter__") and any(
        (found := endless_stream(source)) and frame.function.split(".")[0] in (found[0].name, "__iter__")
        for source in parsed_files(ctx))


def _worker_busy_frame(child: ProcessStack) -> Frame | None:
    """Where a DataLoader worker is, when it is not idle waiting for work: its innermost own frame (else its
    innermost) inside the worker loop; None for an idle worker or another kind of child."""
    for thread in child.threads:
        loop = next((index for index, frame in enumerate(thread.frames) if frame.function == WORKER_LOOP
                     and DATALOADER_FILE in (frame.short_file or frame.file)), None)
        if loop is None:
            continue
        inner = thread.frames[loop + 1:]
        own = [frame for frame in inner if not frame.in_library]
        if own:
            return own[-1]
        if not inner or all(any(part in frame.file for part in IDLE_FILES) for frame in inner):
            return None  # waiting for the next index (queue.get), or tearing down
        return inner[-1]
    return None


def _inner(child: ProcessStack) -> list[Frame]:
    frames = child.threads[0].frames if child.threads else []
    return frames[-3:][::-1]


def _others_waiting(ctx: Context, rank: int) -> str:
    """'rank 0 gave up waiting in all_reduce' for the other ranks, from their tracebacks or stacks."""
    for tb in ctx.tracebacks:
        if tb.rank is not None and tb.rank != rank and tb.collective():
            return f"rank {tb.rank} gave up waiting for it in {tb.collective()}"
    for process in ctx.evidence.processes:
        if process.rank not in (None, rank) and process.role != "agent" and (where := process.waiting()) \
                and where.call:
            return f"rank {process.rank} waits in {where.call}"
    return ""


def _counts_one_node(files: list[SourceFile]) -> bool:
    """The job reads a count of one node's processes (LOCAL_WORLD_SIZE, LOCAL_RANK, nproc_per_node) or a world size
    of its own: a ring computed modulo it can wrap onto the rank itself."""
    local = {"LOCAL_WORLD_SIZE", "LOCAL_RANK", "nproc_per_node", "local_world_size", "local_rank"}
    return any(source.names & local or any(isinstance(node, ast.Constant) and node.value in local
                                           for node in source.walk()) for source in files)


def _no_neighbour_sentinel(ctx: Context) -> str | None:
    """Where the job marks a missing neighbour with -1 (`PROC_NULL = -1`, `rank - 1 if rank > 0 else -1`)."""
    for source in parsed_files(ctx):
        for node in source.walk():
            minus_one = [part for part in (getattr(node, "value", None), getattr(node, "body", None),
                                           getattr(node, "orelse", None)) if isinstance(part, ast.UnaryOp)
                         and isinstance(part.op, ast.USub) and isinstance(part.operand, ast.Constant)
                         and part.operand.value == 1]
            if minus_one and (isinstance(node, ast.IfExp) or isinstance(node, ast.Assign) and any(
                    isinstance(target, ast.Name) and target.id.isupper() for target in node.targets)):
                return ast.unparse(node)[:50]
    return None


def self_peer_findings(ctx: Context) -> list[Finding]:
    """A point-to-point call whose peer is the caller itself: gloo has no pair with its own rank, so it fails or waits
    for ever, whatever the other ranks do."""
    for trace in ctx.evidence.traces:
        if trace.rank is None or trace.calls is None:
            continue
        for call in (*trace.calls.failed, *trace.calls.pending, *trace.calls.posted):
            if call.op in POINT_TO_POINT and call.peer == trace.rank:
                world = trace.world_size or ctx.evidence.expected_world_size
                said = f"rank {trace.rank}: {call}" + (f" raised {call.error[:200]}" if call.error else "")
                files = parsed_files(ctx)
                if files and not _counts_one_node(files):  # a neighbour that is itself: a grid dimension of one rank
                    return [Finding(
                        "p2p-mismatch", f"rank {trace.rank}'s {call.op} at {call.caller} names rank {trace.rank}, "
                        "itself, as its peer: torch.distributed has no send or receive to oneself (gloo has no pair "
                        "with its own rank), where a neighbour comes out as the rank itself (a periodic direction "
                        f"with one rank across it, a ring of one) at this world size of {world}", said, trace.node,
                        trace.rank, "where the neighbour is the rank itself, do the exchange locally (copy the "
                        "boundary across: u[:, 0] = u[:, -2]; u[:, -1] = u[:, 1]) instead of posting a send and a "
                        "receive; or lay the ranks out so that no direction has a single rank")]
                return [Finding(
                    "p2p-mismatch", f"rank {trace.rank}'s {call.op} at {call.caller} names rank {trace.rank}, itself, "
                    f"as its peer: a ring or pair computed modulo another count than the world size ({world})",
                    said, trace.node, trace.rank,
                    "compute peers from the global rank and the world size: dst = (rank + 1) % dist.get_world_size(), "
                    "src = (rank - 1) % dist.get_world_size(); LOCAL_WORLD_SIZE and the processes per node count one "
                    "node only")]
    return []


def split_size_findings(ctx: Context) -> list[Finding]:
    """all_to_all_single's splits as the ranks passed them: what rank i expects from rank j (its output_split_sizes[j])
    must be what j sends to i (j's input_split_sizes[i]). Where not every rank's call is known, a rank that passes its
    own send counts as its receive counts (uneven ones) is the usual mistake."""
    splits = {}
    for trace in ctx.evidence.traces:
        if trace.rank is None or trace.calls is None:
            continue
        for call in (*trace.calls.pending, *trace.calls.failed):
            sizes = [call.integers(name) for name in ("input_split_sizes", "output_split_sizes")]
            if call.op == "all_to_all_single" and all(sizes):
                splits[trace.rank] = (trace.node, call, *sizes)
    fix = ("exchange the counts before the data: recv_counts = torch.empty_like(send_counts); dist.all_to_all_single("
           "recv_counts, send_counts); then pass output_split_sizes=recv_counts.tolist() and an output of "
           "recv_counts.sum() rows")
    world = len(next(iter(splits.values()))[2]) if splits else 0
    if len(splits) == world > 1:
        for rank, (node, call, _, expects) in sorted(splits.items()):
            for peer, count in enumerate(expects):
                sends = splits[peer][2][rank] if peer in splits and rank < len(splits[peer][2]) else count
                if sends != count:
                    return [Finding("shape-mismatch", f"all_to_all_single's split sizes disagree: rank {rank} expects "
                                    f"{count} rows from rank {peer}, which sends it {sends} (output_split_sizes must be "
                                    "what each peer's input_split_sizes gives this rank)", str(call), node, rank, fix)]
    for rank, (node, call, sends, expects) in sorted(splits.items()):
        if sends == expects and len(set(sends)) > 1:
            return [Finding("shape-mismatch", f"rank {rank} passes its own send counts as its receive counts in "
                            f"all_to_all_single ({sends} as both input_split_sizes and output_split_sizes): what it "
                            "receives from each peer is that peer's count for it, which nobody exchanged",
                            str(call), node, rank, fix)]
    return []


def reasoning_findings(ctx: Context) -> list[Finding]:
    """Every rule that matches the ranks' calls, in the order a root cause is most likely."""
    activities = rank_activities(ctx)
    return (self_peer_findings(ctx) + split_size_findings(ctx) + handled_error_findings(ctx, activities)
            + point_to_point_findings(ctx, activities) + root_findings(ctx, activities)
            + group_findings(ctx, activities) + store_server_findings(ctx) + store_counter_findings(ctx)
            + store_findings(ctx)
            + member_elsewhere_findings(ctx, activities)
            + call_mismatch_findings(ctx, activities)
            + timeout_findings(ctx, activities) + dataloader_findings(ctx))


def what_the_ranks_did(ctx: Context) -> str:
    """Each rank as the lab last saw it, for the endings that cannot say more: 'rank 0 gave up in recv(src=1) at
    x.py:12; rank 1 busy in load (data.py:40); rank 2: SIGSEGV'."""
    seen = rank_states(ctx)
    return "; ".join(seen[rank] for rank in sorted(seen))


def rank_states(ctx: Context, activities: dict[int, Activity] | None = None) -> dict[int, str]:
    """rank -> what it was last seen doing (what_the_ranks_did's parts), from the ranks' activities where the caller
    has them already."""
    activities = rank_activities(ctx) if activities is None else activities
    seen = {rank: str(activity) for rank, activity in activities.items()}
    for process in ctx.evidence.processes:
        if process.rank is None or process.rank in seen or process.role == "agent":
            continue
        where = process.waiting()
        if where is not None and where.user_frame is not None:
            seen[process.rank] = f"rank {process.rank} in its own code: {where.user_frame.function} " \
                                 f"({where.user_frame.location})"
    for node, exits in ctx.reports.items():
        for rank, code in exits:
            seen.setdefault(rank, f"rank {rank} ended: {exit_text(code)}")
    for tb in ctx.tracebacks:
        if tb.rank is not None:
            seen.setdefault(tb.rank, f"rank {tb.rank} raised {tb.short_type}")
    if ctx.evidence.nproc_per_node == 1:
        for node in ctx.evidence.nodes:
            said = last_own_line([line.text for line in ctx.lines if line.node == node.index])
            state = exit_text(node.exit_code) if node.exit_code is not None else "still running when the lab stopped it"
            seen.setdefault(node.index, f"rank {node.index} {'ended: ' if node.exit_code is not None else ''}{state}"
                            + (f" (last output: {said})" if said else ""))
    return seen

