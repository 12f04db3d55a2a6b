"""How a run ended when that is all that is known: the lab's own faults, a lost peer, a timeout, a stop,
an exit code.
"""

from __future__ import annotations

import re

from lab.analysis.diagnosis.context import Context, quote
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.logs import collective_in

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
    for tb in ctx.tracebacks:
        if re.search(r"Connection closed by peer|Connection reset by peer|Broken pipe", tb.message):
            return [Finding("peer-lost", "a rank lost its connection to a peer in the middle of a collective",
                            quote(tb.line), tb.node, tb.rank,
                            "find the peer that died first (its own error, an OOM kill or a lab fault) and fix that")]
    return []


def ending_findings(ctx: Context) -> list[Finding]:
    """How the run ended when nothing more specific explains it: timed out, stopped, or a bare exit code."""
    evidence = ctx.evidence
    found = []
    collective_timeout = next((tb for tb in ctx.tracebacks if re.search(r"[Tt]imed out|[Tt]imeout", tb.message)
                               and tb.collective() and tb.collective() != "init_process_group"), None)
    if collective_timeout:
        found.append(Finding("collective-timeout", f"rank {collective_timeout.rank} timed out in "
                                                   f"{collective_timeout.collective()}: a peer never joined it",
                             quote(collective_timeout.line), collective_timeout.node, collective_timeout.rank,
                             "find the rank that did not reach this collective (its log or stack): it is stuck, "
                             "slow, or took another branch"))
    if evidence.timed_out:
        where = "; ".join(f"rank {process.rank} in {collective_in(process.frames)[0] or process.frames[-1].function}"
                          for process in evidence.processes if process.rank is not None and process.frames)
        found.append(Finding("timed-out", "the run did not finish before the lab's timeout",
                             f"stacks at the timeout: {where}" if where else "the lab stopped the run at its timeout",
                             None, None,
                             "pass a short timeout to init_process_group so a missing peer fails fast, and raise "
                             "the lab's --timeout only if the job is just slow"))
    if evidence.stopped:
        found.append(Finding("stopped", f"the run was stopped early: {evidence.stopped}", evidence.stopped, None, None,
                             "run it again; nothing in the logs points at the job itself"))
    for node in evidence.nodes:
        if node.exit_code not in (0, None):
            last = next((line for line in reversed(ctx.lines) if line.node == node.index and line.text.strip()), None)
            found.append(Finding("nonzero-exit", f"node{node.index} exited with code {node.exit_code}",
                                 quote(last) if last else f"node{node.index}: no output", node.index, None,
                                 "read this node's log above the quoted line for the first error"))
    return found
