"""A file several ranks write where they share it: each rank's open for writing empties what the others wrote, so
a reader finds it cut short, mixed or empty. Read from the files each process's code opened for writing (the jobs'
hooks, `writes` of its dump), where the ranks share the folder (the lab's shared folder, a workspace, or one node).
"""

from __future__ import annotations

from lab.analysis.calls import FileOp
from lab.analysis.diagnosis.context import Context
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.sources import UNEXPLAINED, failure_summary
from lab.model.spec import SHARED_MOUNT

# What a file written over by several ranks ends in: a crash of the reader, the job's own check, a timeout.
ENDINGS = UNEXPLAINED | {"rank-crashed", "checkpoint-read-while-written"}


def shared_write_findings(ctx: Context, found: list[Finding]) -> list[Finding]:
    if not {finding.cause for finding in found} <= ENDINGS:
        return []
    writers: dict[str, dict[int, tuple[int | None, FileOp]]] = {}  # path -> rank -> (node, its open)
    for trace in ctx.evidence.traces:
        for op in trace.calls.writes if trace.calls and trace.rank is not None else ():
            if op.op == "write":
                writers.setdefault(op.path, {}).setdefault(trace.rank, (trace.node, op))
    probes = ctx.evidence.probes
    for path, by_rank in sorted(writers.items()):
        nodes = {node for node, _ in by_rank.values()}
        shared = path.startswith(SHARED_MOUNT + "/") or (probes is not None and probes.on_shared_folder(path))
        if len(by_rank) < 2 or not (shared or len(nodes) == 1):
            continue  # one writer, or each node its own copy on its own disk
        ranks = sorted(by_rank)
        node, op = by_rank[ranks[0]]
        where = "a folder every node sees" if shared else f"node{node}'s disk, which its ranks share"
        return [Finding(
            "file-written-by-every-rank", f"{path} is opened for writing by ranks {', '.join(map(str, ranks))} (at "
            f"{op.caller}), on {where}: each open empties what the others wrote, so whoever reads it finds it cut "
            "short, mixed or empty", failure_summary(ctx), node, ranks[0],
            "write it from one rank (if dist.get_rank() == 0: ...) and let the others read it after a barrier, or "
            "give each rank a file of its own (metrics-{rank}.jsonl) and merge them at the end")]
    return []
