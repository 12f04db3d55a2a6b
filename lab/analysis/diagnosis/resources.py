"""The machine ran out: memory (the OOM killer, a SIGKILL), shared memory, GPUs.
"""

from __future__ import annotations

import re

from lab.analysis.diagnosis.context import Context, PatternRule, node_evidence, quote
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.logs import LogLine

KILLED = re.compile(r"exitcode\s*:\s*-9\b|Signal 9 \(SIGKILL\)|exitcode: -9\b|\bKilled\b")


def memory_findings(ctx: Context) -> list[Finding]:
    """The kernel's OOM killer (the node's OOM count went up), or a SIGKILL that nothing else explains."""
    faulted = {fault.node for fault in ctx.evidence.faults}
    found = []
    for node in ctx.evidence.nodes:
        killed_line = next((line for line in ctx.lines if line.node == node.index and KILLED.search(line.text)), None)
        rank = _killed_rank(ctx, node.index)
        if node.oom_killed:
            limit = f" (limit {node.memory_limit})" if node.memory_limit else ""
            found.append(Finding(
                "out-of-memory", f"a process on node{node.index} was killed for exceeding the node's memory{limit}",
                quote(killed_line) if killed_line else f"node{node.index}: the kernel's OOM kill count went up",
                node.index, rank,
                "use less memory per process (smaller batch, fewer processes per node, free what you keep) or give "
                "the nodes more: `lab up --memory 4g --recreate`"))
        elif node.index not in faulted and (node.exit_code in (137, -9) or killed_line):
            if killed_line and (told := _killed_by_the_job(ctx, killed_line, rank)) is not None:
                found.append(told)
                continue
            found.append(Finding(
                "process-killed", f"a process on node{node.index} was killed with SIGKILL",
                quote(killed_line) if killed_line else f"node{node.index} exited with {node.exit_code}",
                node.index, rank,
                "find who sent SIGKILL: the kernel's OOM killer outside the lab's accounting (dmesg), a job "
                "scheduler, or a user; if memory, lower the per-process memory use"))
    return found


KILLED_PID = re.compile(r"\(pid: (?P<pid>\d+)\)")
KILL_WORDS = re.compile(r"kill|terminat|signal|stale|reap|cleanup|clean up", re.IGNORECASE)
LAUNCHER_REPORT = re.compile(r"received by PID|exitcode|\(pid:|Sending process|closing signal")  # torchrun's own


def _killed_by_the_job(ctx: Context, killed: LogLine, rank: int | None) -> Finding | None:
    """A SIGKILLed pid that a process of the job named in its own output before: the job killed its own process
    (a clean-up of "stale" workers by script name, a watchdog)."""
    pid = KILLED_PID.search(killed.text)
    if pid is None:
        return None
    before = ctx.lines[:next((index for index, line in enumerate(ctx.lines) if line is killed), len(ctx.lines))]
    named = next((line for line in reversed(before) if line.node == killed.node and line.rank is not None
                  and line.rank != rank and re.search(rf"\b{pid['pid']}\b", line.text)
                  and KILL_WORDS.search(line.text) and not LAUNCHER_REPORT.search(line.text)), None)
    if named is None:
        return None
    return Finding(
        "killed-by-the-job", f"rank {named.rank} of the job killed its own sibling process {pid['pid']}"
        + (f" (rank {rank})" if rank is not None else "") + f" on node{killed.node}: it printed \"{named.text.strip()[:120]}\""
        " just before that pid died of SIGKILL", f"{quote(named)}; {quote(killed)}", killed.node, named.rank,
        "do not kill processes by name or pattern from inside the job: the job's other ranks run the same script "
        "(pkill -f, psutil matches on the command line); clean up only pids this process started itself and "
        "recorded, and leave ending the job's processes to its launcher")


def _killed_rank(ctx: Context, node: int) -> int | None:
    for rank, code in ctx.reports.get(node, []):
        if code == -9:
            return rank
    return node if ctx.evidence.nproc_per_node == 1 else None


LEFTOVER_SHARE = 0.25  # of /dev/shm held by files from before the run: they, not the job's use, filled it


def _shared_memory(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    leftovers, size = _shm_leftovers(ctx, line.node)
    if leftovers:
        held = sum(found["size"] for found in leftovers)
        shown = ", ".join(f"{found['path']} ({found['size'] / 2**20:,.0f} MiB)" for found in leftovers)
        return (f"shared memory (/dev/shm) ran out on node{line.node}: {held / 2**20:,.0f} MiB of its "
                f"{size / 2**20:,.0f} MiB are held by files older than the job's processes there ({shown}), "
                "segments a killed job or worker left behind, so the job's own shared tensors did not fit",
                f"remove them on node{line.node} (rm {' '.join(found['path'] for found in leftovers)}) once no process "
                "uses them; end jobs so their workers can unlink their segments (no kill -9 of DataLoader workers), "
                "and clean /dev/shm between jobs on machines that are reused")
    return (f"shared memory (/dev/shm) ran out on node{line.node}: tensors handed between processes live there",
            "share less at once: fewer or lighter DataLoader workers (num_workers), smaller batches, or "
            "torch.multiprocessing.set_sharing_strategy('file_system'); or give the machines a bigger /dev/shm "
            "(the lab's nodes have 512 MiB, Docker's default is 64 MiB: --shm-size; Kubernetes: a memory emptyDir); "
            "`lab doctor` shows each node's /dev/shm")


def _shm_leftovers(ctx: Context, node: int | None) -> tuple[list[dict], int]:
    """The node's /dev/shm files written before the job's first Python process there started (else before the run),
    where they hold a good share of it (the nodes' answers after the run, `probes`), and /dev/shm's size."""
    facts = ctx.evidence.probes.of(node) if ctx.evidence.probes is not None and node is not None else None
    started = [trace.started_at for trace in ctx.evidence.traces if trace.node == node and trace.started_at] or [
        moment for moment in (ctx.evidence.started_at,) if moment]  # the job's first process there, else the run
    if facts is None or not facts.shm.get("size") or not started:
        return [], 0
    before = [found for found in facts.shm.get("largest") or [] if found["mtime"] < min(started)]
    size = facts.shm["size"]
    return (before if sum(found["size"] for found in before) >= LEFTOVER_SHARE * size else []), size


def _no_gpu(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    node = node_evidence(ctx.evidence, line.node)
    gpus = node.gpus if node else 0
    if "deserialize object on a CUDA device" in line.text:
        return (f"a checkpoint saved from GPUs is loaded on node{line.node}, which has {gpus or 'no'} GPU(s): torch.load "
                "tries to put its tensors back on CUDA", "load it onto the CPU: torch.load(path, map_location='cpu') "
                "(or map_location=device, with device chosen from torch.cuda.is_available()), then move the model")
    fix = ("use the gloo backend on CPU nodes (init_process_group('gloo'), tensors on the CPU), or run on a lab "
           "with GPUs: `lab up --gpus all` on a GPU host (`lab doctor` shows what each node has)")
    if "_cuda_setDevice" in line.text:
        fix = "call torch.cuda.set_device(local_rank) only when torch.cuda.is_available(); " + fix
    return (f"nccl/CUDA asked for on node{line.node}, which has {gpus or 'no'} GPU(s) usable by torch", fix)


def _duplicate_gpu(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    node = node_evidence(ctx.evidence, line.node)
    gpus = node.gpus if node else 0
    return (f"more nccl processes than GPUs on node{line.node}: two ranks landed on one GPU",
            f"run at most one process per GPU (--nproc-per-node {gpus or 1} here), and give each its own device: "
            "torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before init_process_group; or use gloo")


PATTERNS = [
    PatternRule("shared-memory-exhausted", re.compile(
        r"unable to (?:allocate shared memory|write to file </torch_|open shared memory)|insufficient shared memory"
        r"|[Bb]us error.*(?:shared memory|shm)|/dev/shm.*No space left on device"), _shared_memory),
    PatternRule("nccl-without-gpu", re.compile(
        r"No CUDA GPUs are available|Found no NVIDIA driver|Torch not compiled with CUDA enabled"
        r"|ProcessGroupNCCL is only supported with GPUs|Distributed package doesn't have NCCL built in"
        r"|NCCL is not available|CUDA driver initialization failed|no CUDA-capable device is detected"
        r"|has no attribute '_cuda_setDevice'|Attempting to deserialize object on a CUDA device"), _no_gpu),
    PatternRule("duplicate-gpu", re.compile(
        r"Duplicate GPU detected|CUDA error: invalid device ordinal"), _duplicate_gpu),
]
