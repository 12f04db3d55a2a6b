"""How a run ended when that is all that is known: the lab's own faults, a lost peer, a timeout, a stop,
an exit code.
"""

from __future__ import annotations

import re

from lab.analysis.diagnosis.context import Context, quote
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.logs import exit_text, last_own_line
from lab.analysis.diagnosis.waits import rank_activities, what_the_ranks_did

# Faults as a manifest names them (actions) and as the lab finds them in force after a run (node states).
FAULT_WORDS = {"kill": "killed", "kill-node": "killed", "kill-worker": "had a worker killed", "stop": "stopped",
               "pause": "paused", "partition": "cut off from the network", "delay": "slowed down (network delay)",
               "partitioned": "cut off from the network"}


def fault_findings(ctx: Context) -> list[Finding]:
    """The lab's own faults; with one process per node the faulted node's rank is its index (as read_lines says)."""
    one_per_node = ctx.evidence.nproc_per_node == 1
    return [Finding("lab-fault", f"node{fault.node} was {FAULT_WORDS.get(fault.action, fault.action)} by the lab "
                                 f"(fault '{fault.action}')",
                    f"the lab injected '{fault.action}' on node{fault.node} during the run", fault.node,
                    fault.node if one_per_node else None,
                    "this failure was made on purpose: to survive it, restart workers from a snapshot "
                    "(torchrun --max-restarts N) and let membership shrink (--nnodes MIN:MAX)")
            for fault in ctx.evidence.faults]


def fault_explains(ctx: Context) -> bool:
    """A fault explains the run when its node failed, the run hung, or a peer lost a connection."""
    faulted = {fault.node for fault in ctx.evidence.faults}
    return (ctx.evidence.timed_out or any(node.exit_code != 0 for node in ctx.evidence.nodes if node.index in faulted)
            or any(re.search(r"closed by peer|reset by peer|Broken pipe", tb.message) for tb in ctx.tracebacks))


def peer_lost_findings(ctx: Context) -> list[Finding]:
    """A lost connection, with the peer that ended first where the lab knows which and how."""
    for tb in ctx.tracebacks:
        if re.search(r"Connection closed by peer|Connection reset by peer|Broken pipe", tb.message):
            gone = _ended_first(ctx, tb)
            if gone is None and ctx.evidence.timed_out:
                return []  # the lab's stop of a hung run closed the connection: the hang is the finding
            seen = what_the_ranks_did(ctx)
            return [Finding("peer-lost", "a rank lost its connection to a peer in the middle of a collective"
                            + (f": {gone} first" if gone else ""),
                            quote(tb.line) + (f"; the ranks: {seen}" if seen else ""), tb.node, tb.rank,
                            f"find why {gone.split(' ended')[0]} ended (its last lines of output, its exit status)"
                            if gone else "find the peer that died first (its own error, an OOM kill or a lab fault) "
                            "and fix that")]
    return []


def _ended_first(ctx: Context, lost: object) -> str | None:
    """'rank 1 ended (exit 3)': another process that ended by itself, from torchrun's reports or its node's exit."""
    consequences = (0, 1, -15, 143)  # ended well, a Python error's status, torchrun's SIGTERM to the others
    for node, exits in ctx.reports.items():
        for rank, code in exits:
            if rank != getattr(lost, "rank", None) and code not in consequences:
                return f"rank {rank} ended ({exit_text(code)})"
    for node in ctx.evidence.nodes:
        if node.index != getattr(lost, "node", None) and node.exit_code not in (*consequences, None):
            return f"node{node.index} ended ({exit_text(node.exit_code)})"
    return None


def _stuck_fix(ctx: Context) -> str:
    """What to do about a run that timed out with no rank inside a distributed call: where each process was, from
    its stack, is what it waited for; a job with no worker at all never got past its launchers."""
    places: dict[str, str] = {}  # where -> the first process found there
    for process in ctx.evidence.processes:
        where = process.waiting() if process.role != "agent" else None
        if where is not None and where.user_frame is not None:
            who = f"rank {process.rank}" if process.rank is not None else f"a child of pid {process.ppid}"
            places.setdefault(f"{where.user_frame.function} ({where.user_frame.location})", who)
    if places:
        return ("no rank was waiting for another when the lab stopped the run: "
                + "; ".join(f"{who} in {place}" for place, who in list(places.items())[:4])
                + ". What those lines wait for is the hang (a lock, a child process or queue, a file, input, a loop "
                "that never ends): every thread's stack is in the run's record (stacks/ in its folder)")
    agents = [process for process in ctx.evidence.processes if process.role == "agent"]
    if agents and not any(process.rank is not None for process in ctx.evidence.processes):
        return ("no worker process ever started: the launchers (torchrun) were still forming the job when the lab "
                "stopped it; compare their options on every node (--nnodes, --node-rank, the rendezvous endpoint "
                "and id) with the nodes the job was launched on")
    return ("pass a short timeout to init_process_group so a missing peer fails fast, and raise the lab's --timeout "
            "only if the job is just slow")


def ending_findings(ctx: Context) -> list[Finding]:
    """How the run ended when nothing more specific explains it: timed out, stopped, or a bare exit code."""
    evidence = ctx.evidence
    found = []
    collective_timeout = next((tb for tb in ctx.tracebacks if re.search(r"[Tt]imed out|[Tt]imeout", tb.message)
                               and tb.collective() and tb.collective() != "init_process_group"), None)
    if collective_timeout:
        seen = what_the_ranks_did(ctx)
        found.append(Finding("collective-timeout", f"rank {collective_timeout.rank} timed out in "
                                                   f"{collective_timeout.collective()} waiting for the other ranks",
                             quote(collective_timeout.line) + (f"; the ranks: {seen}" if seen else ""),
                             collective_timeout.node, collective_timeout.rank,
                             "find the rank that did not reach this collective (the ranks' lines say where each "
                             "was): it is stuck, slow, or took another branch"))
    if evidence.timed_out:
        seen = what_the_ranks_did(ctx)
        waiting = rank_activities(ctx)
        found.append(Finding("timed-out", "the run did not finish before the lab's timeout"
                             + (f"; {seen}" if seen else ""),
                             f"at the timeout: {seen}" if seen else "the lab stopped the run at its timeout",
                             None, None,
                             "the ranks wait in the calls above for each other: make them agree (the same calls in "
                             "the same order, with the same roots, groups, peers and tags on every rank), and give "
                             "init_process_group a timeout so each rank fails with its own error" if waiting else
                             _stuck_fix(ctx)))
    if evidence.stopped:
        seen = what_the_ranks_did(ctx)
        found.append(Finding("stopped", f"the run was stopped early: {evidence.stopped}"
                             + (f"; the ranks: {seen}" if seen else ""), evidence.stopped, None, None,
                             "start from the first error of the node that failed (its log above); the others ran on "
                             "because nothing ended them with it (an error the job caught, a wait with a long "
                             "timeout): make a failure end every rank, e.g. let it raise so torchrun stops the rest"))
    for node in evidence.nodes:
        if node.exit_code not in (0, None):
            last = next((line for line in reversed(ctx.lines) if line.node == node.index and line.text.strip()), None)
            said = last_own_line([line.text for line in ctx.lines if line.node == node.index])
            raised = any(tb.node == node.index for tb in ctx.tracebacks)
            found.append(Finding("nonzero-exit", f"node{node.index} exited with code {node.exit_code}"
                                 + (f" after printing: {said}" if said else ""),
                                 quote(last) if last else f"node{node.index}: no output", node.index, None,
                                 "read this node's log above the quoted line for the first error" if raised else
                                 f"the program ended itself with status {node.exit_code} without a Python error "
                                 "(sys.exit, os._exit, a command that failed): the line it printed last says why; "
                                 "look for that message in your code and what makes it true on this node only"))
    return found
