"""What every rule reads (the evidence and its parsed logs) and the helpers the rule families share.
"""

from __future__ import annotations

import os
import re
import traceback
from dataclasses import dataclass
from typing import Callable

from lab import paths
from lab.analysis.diagnosis.evidence import Evidence, NodeEvidence
from lab.analysis.flight import FailedCheck
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.logs import EXCEPTION_LINE, LIBRARY_FILE, LogLine, Traceback
from lab.model.spec import SHARED_MOUNT


@dataclass(frozen=True)
class Context:
    evidence: Evidence
    lines: list[LogLine]
    tracebacks: list[Traceback]
    reports: dict[int, list[tuple[int, int]]]
    patterns: tuple[PatternRule, ...]  # every family's message rules

    @property
    def multi_node(self) -> bool:
        return self.evidence.nnodes > 1 or len({node.hostname for node in self.evidence.nodes}) > 1


@dataclass(frozen=True)
class PatternRule:
    """A line matching `pattern` is evidence of `cause`; `describe` turns the match into (title, fix)."""
    cause: str
    pattern: re.Pattern
    describe: Callable[[re.Match, LogLine, Context], tuple[str, str] | None]  # None: not this cause after all


# Set (the suite sets it): a rule that raises fails the diagnosis instead of being skipped and logged.
STRICT = "LAB_DIAGNOSIS_STRICT"


def guarded(rule, *args):
    """rule(*args); None where it raises on a job nobody foresaw, so one rule costs its own findings, not the run's
    diagnosis. The traceback goes to the lab's logs/diagnosis.log; under LAB_DIAGNOSIS_STRICT it raises."""
    try:
        return rule(*args)
    except Exception:
        if os.environ.get(STRICT):
            raise
        log = paths.logs_dir() / "diagnosis.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as handle:
            handle.write(f"{rule.__module__}.{rule.__qualname__} failed:\n{traceback.format_exc()}\n")
        return None


def pattern_findings(ctx: Context) -> list[Finding]:
    found = []
    for line in ctx.lines:
        if line.text.startswith("    "):
            continue  # a source line a traceback quotes (`raise RuntimeError("...")`), not a message
        for rule in ctx.patterns:
            if match := rule.pattern.search(line.text):
                described = guarded(rule.describe, match, line, ctx)
                if described:
                    rank = line.rank if line.rank is not None else report_root_rank(ctx, line.node)
                    found.append(Finding(rule.cause, described[0], quote(line), line.node, rank, described[1]))
    return found


def explained_by_rule(ctx: Context, line: LogLine, read_only: bool = False) -> bool:
    """A line one of the message rules already turns into a cause. A rule whose pattern matches but whose describe
    says "not this cause after all" explains nothing (the crash is then told by the other mechanisms, not dropped);
    with `read_only`, a line a rule reads is enough (an abort that follows a message the rules defer to others)."""
    if JOINED.search(line.text) or STORE_WAIT.search(line.text):
        return True
    return any((match := rule.pattern.search(line.text)) and (read_only or guarded(rule.describe, match, line, ctx))
               for rule in ctx.patterns)


def rendezvous_host(evidence: Evidence) -> str:
    return evidence.nodes[0].hostname if evidence.nodes else "node0"


def node_evidence(evidence: Evidence, index: int) -> NodeEvidence | None:
    return next((node for node in evidence.nodes if node.index == index), None)


def quote(line: LogLine, limit: int = 300) -> str:
    text = line.text.strip()
    return f"{line.where()}: {text if len(text) <= limit else text[:limit] + '...'}"


def quoted_source(ctx: Context, tb: Traceback, frame) -> str:
    """The source line a traceback quotes under `frame` (the line after its 'File ..., line N' line); '' if none."""
    lines = [line.text for line in ctx.lines if line.node == tb.node and line.rank == tb.rank]
    for index, text in enumerate(lines[:-1]):
        if f'"{frame.file}", line {frame.line}, in {frame.function}' in text:
            following = lines[index + 1].strip()
            return "" if following.startswith(("File ", "^", "~")) or EXCEPTION_LINE.match(following) else following
    return ""


def raised_by_own_check(ctx: Context, tb: Traceback) -> bool:
    """The script's own check: raised in its code by a `raise` or an `assert` (not torch's error at the user's line,
    as an in-place operation on a leaf tensor is, nor open()'s), where the log quotes the line."""
    if not tb.frames or LIBRARY_FILE.search(tb.frames[-1].file):
        return False
    quoted = quoted_source(ctx, tb, tb.frames[-1])
    return not quoted or quoted.startswith(("raise", "assert")) or " raise " in f" {quoted}"


def gist(message: str, limit: int = 160) -> str:
    """The message's first line, and the next one where the first only announces it ('Error(s) in loading ...:')."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()] or ["(no message)"]
    first = " ".join(lines[:2]) if lines[0].endswith(":") and len(lines) > 1 else lines[0]
    return first if len(first) <= limit else first[:limit] + "..."


def failed_check_of(ctx: Context, tb: Traceback) -> FailedCheck | None:
    """What the statement that raised `tb` compared, as its process read it as it ended (None in records made before
    the hooks kept it, or where the process wrote no dump)."""
    frame = tb.user_frame()
    if frame is None:
        return None
    where = f"{os.path.basename(frame.file)}:{frame.line}"
    return next((trace.failed_check for trace in ctx.evidence.traces if trace.failed_check is not None
                 and trace.failed_check.where == where and (trace.rank == tb.rank or tb.rank is None)
                 and (trace.node == tb.node or trace.node is None)), None)


def env_values(ctx: Context, key: str) -> list[str]:
    values = [ctx.evidence.env[key]] if key in ctx.evidence.env else []
    return values + [process.env[key] for process in ctx.evidence.processes if key in process.env]


def near(ctx: Context, line: LogLine, pattern: str) -> re.Match | None:
    """The first line of the same node matching `pattern`."""
    return next((found for other in ctx.lines if other.node == line.node
                 for found in [re.search(pattern, other.text)] if found), None)


def report_root_rank(ctx: Context, node: int) -> int | None:
    report = ctx.reports.get(node)
    return report[0][0] if report else None


def node_of_rank(ctx: Context, rank: int) -> int | None:
    for process in ctx.evidence.processes:
        if process.rank == rank:
            return process.node
    for line in ctx.lines:
        if line.rank == rank:
            return line.node
    return rank // ctx.evidence.nproc_per_node if ctx.evidence.nproc_per_node else None


JOINED = re.compile(r"(?P<joined>\d+)/(?P<size>\d+) clients joined")


STORE_WAIT = re.compile(r"wait timeout after \d+ms, keys: (?P<keys>\S+)"
                        r"|Timed out after \d+ seconds waiting for clients")


def missing_rank(keys: str | None) -> int:
    """The rank a store wait was for: gloo's keys end in it ('/default_pg/0//cpu//0/2'); -1 when not told."""
    last = (keys or "").rstrip("/").rsplit("/", 1)[-1]
    return int(last) if last.isdigit() else -1


# Exceptions that are the consequence of another rank's failure, not a cause of their own.
SYMPTOM = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|[Tt]imed out|timeout|DistStoreError"
    r"|DistNetworkError|DistBackendError|client socket|Socket Timeout|NCCL communicator was aborted"
    r"|ProcessGroupNCCL.*(?:watchdog|Timeout)|Watchdog caught collective operation timeout"
    r"|failed to pass monitoredBarrier")


# Errors about what a call was given, never a peer's failure echoed back, whatever words they hold ("requires
# timeout == 0" is an argument refused, not a wait that ran out).
ARGUMENT_ERRORS = {"AssertionError", "ValueError", "TypeError", "KeyError", "IndexError", "AttributeError",
                   "NameError"}


def echoes_a_peer(tb: Traceback) -> bool:
    """The traceback's exception is another rank's failure echoed back (a lost connection, a timeout)."""
    return tb.short_type not in ARGUMENT_ERRORS and bool(SYMPTOM.search(f"{tb.exc_type}: {tb.message}"))


def on_shared_folder(ctx: Context, path: str) -> bool:
    """`path` is in the lab's shared folder, or in a folder the nodes said they all see (no node's own disk)."""
    probes = ctx.evidence.probes
    return path.startswith(SHARED_MOUNT + "/") or (probes is not None and probes.on_shared_folder(path))


def job_lines(ctx: Context, wanted: Callable[[str], object]) -> list[tuple[str, int, str]]:
    """(file name, line number, the line stripped) of the job's own lines (the files its hooks kept) whose code, its
    comment aside, `wanted` finds: where a job sends a signal, names a worker, registers a buffer."""
    sources = {path: text for trace in ctx.evidence.traces for path, text in trace.sources.items()}
    return [(path.rsplit("/", 1)[-1], number, text.strip()) for path, source in sources.items()
            for number, text in enumerate(source.splitlines(), 1) if wanted(text.split("#", 1)[0])]
