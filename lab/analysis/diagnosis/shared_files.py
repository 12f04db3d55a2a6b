"""Files shared where they must not be, or read before they are there:

- a file several ranks write where they share it: each rank's open for writing empties what the others wrote, so a
  reader finds it cut short, mixed or empty. Read from the files each process's code opened for writing (the jobs'
  hooks, `writes` of its dump), where the ranks share the folder (the lab's shared folder, a workspace, or one node);
- a file one rank opened before another rank wrote it: it waited for something that came true earlier;
- a file one rank opened after another rank of its node removed it (each cleaning up what it took for stale);
- a file handle a Dataset opens in `__init__` and reads in `__getitem__`, behind a DataLoader with worker processes:
  the forked workers share its offset (and an HDF5 or SQLite handle's state), so their reads interleave.
"""

from __future__ import annotations

import ast
import os
import re

from lab.analysis.calls import FileOp
from lab.analysis.diagnosis.context import Context, echoes_a_peer, on_shared_folder
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.sources import (UNEXPLAINED, SourceFile, call_name, failure_summary, loaders_with_workers,
                                            parsed_files, self_attribute, walk)

# What a file written over by several ranks ends in: a crash of the reader, the job's own check, a timeout, a file
# another rank was to write missing, and one rank alone seeming to load what the others did not.
ENDINGS = UNEXPLAINED | {"rank-crashed", "checkpoint-read-while-written", "resumed-on-some-ranks"}


def shared_write_findings(ctx: Context, found: list[Finding]) -> list[Finding]:
    if not {finding.cause for finding in found} <= ENDINGS:
        return []
    writers: dict[str, dict[int, tuple[int | None, FileOp]]] = {}  # path -> rank -> (node, its open or save)
    local_ranks: dict[int, str | None] = {}  # rank -> the LOCAL_RANK it read
    for trace in ctx.evidence.traces:
        if trace.calls is None or trace.rank is None:
            continue
        local_ranks[trace.rank] = trace.calls.env_read.get("LOCAL_RANK")
        for op in (*trace.calls.writes, *trace.calls.files):
            if op.op in ("write", "save"):
                writers.setdefault(op.path, {}).setdefault(trace.rank, (trace.node, op))
    for path, by_rank in sorted(writers.items()):
        nodes = {node for node, _ in by_rank.values()}
        shared = on_shared_folder(ctx, path)
        if len(by_rank) < 2 or not (shared or len(nodes) == 1):
            continue  # one writer, or each node its own copy on its own disk
        ranks = sorted(by_rank)
        node, op = by_rank[ranks[0]]
        where = "a folder every node sees" if shared else f"node{node}'s disk, which its ranks share"
        how = "saved (torch.save)" if op.op == "save" else "opened for writing"
        local = {local_ranks.get(rank) for rank in ranks}
        local_rank = next(iter(local)) if len(local) == 1 else None  # the one LOCAL_RANK every writer read
        numbered = local_rank is not None and re.search(rf"(?<!\d){re.escape(local_rank)}(?!\d)",
                                                        os.path.basename(path))
        if numbered and len(nodes) > 1 and len(set(local_ranks.values())) > 1:  # the name numbered per local rank
            return [Finding(
                "file-written-by-every-rank", f"{path} is {how} by ranks {', '.join(map(str, ranks))} (at {op.caller})"
                f", one on each node: its name comes from the local rank ({local_rank} on each of them), which "
                "repeats on every node, so the nodes' ranks write over each other's file and other names are never "
                "written", failure_summary(ctx), node, ranks[0],
                "name each rank's file with its global rank (RANK, dist.get_rank()), which is unique across nodes; "
                "LOCAL_RANK only numbers the processes of one node (pick a GPU with it)")]
        return [Finding(
            "file-written-by-every-rank", f"{path} is {how} by ranks {', '.join(map(str, ranks))} (at "
            f"{op.caller}), on {where}: each write replaces what the others wrote, so whoever reads it finds it cut "
            "short, mixed or another rank's", failure_summary(ctx), node, ranks[0],
            "write it from one rank (if dist.get_rank() == 0: ...) and let the others read it after a barrier, or "
            "give each rank a file of its own (metrics-{rank}.jsonl) and merge them at the end")]
    return []


def removed_by_another_rank_findings(ctx: Context) -> list[Finding]:
    """A rank failed to open a file that another rank of its node (or of a shared folder) had removed before: each
    rank cleaned up what it took for stale, keeping only its own files. The hooks keep each failed read and each
    removal (os.remove, Path.unlink, shutil.rmtree) with its time."""
    removals = [(trace.rank, trace.node, op) for trace in ctx.evidence.traces if trace.calls and trace.rank is not None
                for op in trace.calls.removed]
    writers = {(op.path, trace.rank) for trace in ctx.evidence.traces if trace.calls and trace.rank is not None
               for op in (*trace.calls.writes, *trace.calls.files) if op.op in ("write", "save")}
    for trace in ctx.evidence.traces:
        for read in (trace.calls.reads if trace.calls else ()):
            if not read.error or "FileNotFoundError" not in read.error:
                continue
            before = [(rank, op) for rank, node, op in removals if rank != trace.rank and (
                op.path == read.path or op.op == "rmtree" and read.path.startswith(op.path + os.sep))
                and (node == trace.node or on_shared_folder(ctx, read.path))
                and (op.at is None or read.at is None or op.at <= read.at)]
            if not before:
                continue
            remover, removal = before[-1]
            wrote = sorted(rank for path, rank in writers if path == read.path and rank != remover)
            by = f", which rank {wrote[0]} wrote" if wrote else ""
            where = "a folder every node sees" if on_shared_folder(ctx, read.path) else f"node{trace.node}'s disk"
            return [Finding(
                "file-removed-by-another-rank", f"rank {trace.rank} could not open {os.path.basename(read.path)} (at "
                f"{read.caller}): rank {remover} had removed it (at {removal.caller}){by}, on {where}, which they "
                "share: more than one rank cleans up the same folder, each keeping only what it wrote itself",
                f"rank {trace.rank}: {read.error[:200]}; rank {remover} removed {read.path}", trace.node, trace.rank,
                "clean a folder up from one process per folder (local rank 0 on a node's disk, rank 0 on a shared "
                "one), keeping every rank's files (the whole list of names, not this rank's own), before the ranks "
                "write or after a barrier; never remove a file another rank may have written")]
    return []


def read_before_written_findings(ctx: Context) -> list[Finding]:
    """A rank failed to open a file (not there) that another rank wrote a moment later: it did not wait for the file
    to be complete, but for something that came true earlier (another file's existence, a marker, a fixed sleep).
    The hooks keep the failed read's time and each rank's first writes, with theirs."""
    writes = [(trace.rank, op) for trace in ctx.evidence.traces if trace.calls and trace.rank is not None
              for op in (*trace.calls.writes, *trace.calls.files) if op.op in ("write", "save")]
    for trace in ctx.evidence.traces:
        for read in (trace.calls.reads if trace.calls else ()):
            if not read.error or "FileNotFoundError" not in read.error or read.at is None:
                continue
            later = [(rank, op) for rank, op in writes if rank != trace.rank and op.path == read.path
                     and op.at is not None and op.at > read.at]
            if not later:
                continue
            writer, write = min(later, key=lambda item: item[1].at)
            poll = _existence_poll(ctx, read.path)
            return [Finding(
                "read-before-written", f"rank {trace.rank} opened {os.path.basename(read.path)} at {read.caller} "
                f"{write.at - read.at:.1f} s before rank {writer} wrote it (at {write.caller}): it did not wait for "
                "the file to be complete" + (f", but for `{poll[1]}` ({poll[0]}), which comes true earlier" if poll
                                             else ""), f"rank {trace.rank}: {read.error[:200]}; rank {writer} "
                f"opened it for writing {write.at - read.at:.2f} s later", trace.node, trace.rank,
                "wait for completion, not existence: meet at dist.barrier() after the writer is done (a group per node "
                "for a node's own files), or write under a temporary name and os.replace it into place last, and wait "
                "for that final name (or a marker written after everything)")]
    return []


def _existence_poll(ctx: Context, path: str) -> tuple[str, str] | None:
    """(FILE:LINE, test) of a `while not ...exists(...)` loop of the job's code that polls another file than `path`."""
    for source in parsed_files(ctx):
        for loop in source.walk():
            if isinstance(loop, ast.While) and "exists(" in (test := ast.unparse(loop.test)) and \
                    os.path.basename(path) not in test:
                return f"{source.name}:{loop.lineno}", f"while {test}"
    return None


# Calls that return a handle whose state (an offset, a library's own) forked processes would share.
OPENERS = {"open", "fdopen", "File", "connect"}  # open / io.open / Path.open, os.fdopen, h5py.File, sqlite3.connect
READ_BY_WORKERS = {"__getitem__", "__getitems__", "__iter__"}


def handle_shared_with_workers_findings(ctx: Context, found: list[Finding]) -> list[Finding]:
    if not {finding.cause for finding in found} <= ENDINGS:
        return []
    for source in parsed_files(ctx):
        loaders = loaders_with_workers(source)
        opened = _handle_read_by_workers(source) if loaders else None
        if opened is None:
            continue
        attribute, made = opened
        workers, count = loaders[0]
        own = next((tb for tb in ctx.tracebacks if not echoes_a_peer(tb)), None)  # the reader that got bad data
        evidence = (f"node{own.node} rank {own.rank}: {own.short_type}: {own.message}"[:300] if own
                    else failure_summary(ctx))
        return [Finding(
            "handle-shared-with-workers", f"the Dataset opens self.{attribute} once in __init__ ({source.name}:"
            f"{made.lineno}, `{ast.unparse(made)[:60]}`) and reads it in every item, behind a DataLoader with "
            f"num_workers={count} ({source.name}:{workers.lineno}): the forked workers share that handle's offset, "
            "so one worker's seek moves the others' reads, and items come back mixed or corrupt",
            evidence, own.node if own else None, own.rank if own else None,
            f"open the file in each worker, not before they fork: lazily in __getitem__ (if self.{attribute} is None: "
            f"self.{attribute} = open(...)) or in worker_init_fn; or read without a shared offset (os.pread, "
            "np.memmap)")]
    return []


def _handle_read_by_workers(source: SourceFile) -> tuple[str, ast.Call] | None:
    """(attribute, its open() call) of a class that opens self.<attribute> in __init__ and uses it where workers
    read."""
    for cls in (node for node in source.walk() if isinstance(node, ast.ClassDef)):
        methods = {item.name: item for item in cls.body if isinstance(item, ast.FunctionDef)}
        readers = [methods[name] for name in READ_BY_WORKERS if name in methods]
        if "__init__" not in methods or not readers:
            continue
        for node in walk(methods["__init__"]):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and call_name(
                    node.value) in OPENERS and any(self_attribute(target) for target in node.targets):
                attribute = next(self_attribute(target) for target in node.targets if self_attribute(target))
                if any(self_attribute(use) == attribute for reader in readers for use in walk(reader)):
                    return attribute, node.value
    return None
