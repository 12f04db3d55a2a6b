"""Reading the nodes' logs: lines per rank, Python tracebacks, torchrun's failure reports.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from lab.analysis.diagnosis.evidence import Evidence
from lab.analysis.stacks import Frame

# torchrun and c10d put "[rank3]:" (global rank) or "[default0]:" (role + local rank) before a worker's lines.
RANK_PREFIX = re.compile(r"^\[(?:rank(?P<rank>\d+)|(?P<role>[A-Za-z_]+?)(?P<local>\d+))\]:\s?")


TRACEBACK_START = "Traceback (most recent call last):"


TRACEBACK_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')


# A warning as Python's warnings module prints it: 'FILE.py:LINE: CategoryWarning: text'.
WARNING_LINE = re.compile(r"(?P<file>\S+\.py):(?P<line>\d+): (?P<category>\w*Warning): (?P<text>.*)")

EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|NotMet|Warning|BdbQuit))"
                            r"(?::\s?(?P<message>.*))?$")

# Any exception's line, whatever its class is called (torch._dynamo.exc.Unsupported, a library's own): taken as one
# only where Python prints it, right after a traceback's frames.
ANY_EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?::\s?(?P<message>.*))?$")


# torchrun's failure report: "  rank      : 1 (local_rank: 1)" then "  exitcode  : -9 (pid: 123)".
REPORT_RANK = re.compile(r"^\s*rank\s*:\s*(?P<rank>\d+)\s*\(local_rank")


REPORT_EXIT = re.compile(r"^\s*exitcode\s*:\s*(?P<code>-?\d+)")


LIBRARY_FILE = re.compile(r"site-packages|dist-packages|/lib/python3[.\d]*/|^<frozen|/jobhooks/sitecustomize\.py$|\.pyx$")


@dataclass(frozen=True)
class LogLine:
    node: int
    rank: int | None
    text: str  # without the rank prefix

    def where(self) -> str:
        return f"node{self.node}" + (f" rank {self.rank}" if self.rank is not None else "")


@dataclass
class Traceback:
    node: int
    rank: int | None
    exc_type: str
    message: str
    line: LogLine  # the exception line
    frames: list[Frame]
    thread: str | None = None  # raised in a thread other than the main one ('Exception in thread NAME:' above it)

    @property
    def short_type(self) -> str:
        return self.exc_type.rsplit(".", 1)[-1]

    def user_frame(self) -> Frame | None:
        """The innermost frame in the user's own code (not torch's or the standard library's)."""
        own = [frame for frame in self.frames if not LIBRARY_FILE.search(frame.file)]
        return own[-1] if own else (self.frames[-1] if self.frames else None)

    def collective(self, outermost: bool = False) -> str | None:
        """The torch.distributed call the process was in, e.g. 'all_reduce': the innermost public one, or with
        `outermost` the one the user's code called (the inner ones can be torch's own helpers)."""
        for frame in self.frames if outermost else reversed(self.frames):
            if frame.file.endswith("distributed_c10d.py") and not frame.function.startswith("_"):
                return frame.function
        return None


def read_lines(evidence: Evidence) -> list[LogLine]:
    """Every node's lines, prefixes removed, each with the global rank when it can be told."""
    lines = []
    for node in evidence.nodes:
        for raw in node.lines:
            text, rank = raw, None
            while match := RANK_PREFIX.match(text):
                if match["rank"] is not None:
                    rank = int(match["rank"])
                elif rank is None:
                    rank = node.index * evidence.nproc_per_node + int(match["local"])
                text = text[match.end():]
            if rank is None and evidence.nproc_per_node == 1:
                rank = node.index
            lines.append(LogLine(node.index, rank, text.rstrip()))
    return lines


def errors_not_printed(evidence: Evidence, printed: list[Traceback]) -> tuple[list[LogLine], list[Traceback]]:
    """The traceback each rank's last words hold, as log lines and parsed, for the ranks whose logs (`printed`: their
    tracebacks) hold none of that type: its output went elsewhere (torchrun's --redirects, a log file of its own), so
    the rules read it from there. torchrun's own ChildFailedError in a node's log is not the rank's."""
    seen = {(tb.node, tb.rank, tb.short_type) for tb in printed}
    lines, tracebacks = [], []
    for trace in evidence.traces:
        if not trace.error or trace.node is None or trace.rank is None:
            continue
        error = [LogLine(trace.node, trace.rank, text) for text in trace.error.rstrip().splitlines()]
        parsed = read_tracebacks(error)
        if not any((tb.node, tb.rank, tb.short_type) in seen for tb in parsed):
            lines += error
            tracebacks += parsed
    return lines, tracebacks


THREAD_DIED = re.compile(r"^Exception in thread (?P<name>.+?)(?: \(\w+\))?:$")  # threading.excepthook's first line


def read_tracebacks(lines: list[LogLine]) -> list[Traceback]:
    """Python tracebacks in the logs, followed per (node, rank) stream so interleaved ranks stay apart."""
    open_frames: dict[tuple[int, int | None], list[Frame]] = {}
    threads: dict[tuple[int, int | None], str | None] = {}
    previous: dict[tuple[int, int | None], str] = {}
    indents: dict[tuple[int, int | None], int] = {}  # a traceback printed indented (a second log prefix's space)
    after_frame: set[tuple[int, int | None]] = set()  # streams whose last line was a frame or its quoted source
    found = []
    for line in lines:
        key = (line.node, line.rank)
        if line.text.strip() == TRACEBACK_START:
            open_frames[key] = []
            indents[key] = len(line.text) - len(line.text.lstrip())
            thread = THREAD_DIED.match(previous.get(key, ""))
            threads[key] = thread["name"] if thread else None
            continue
        previous[key] = line.text.strip()
        if key not in open_frames:
            continue
        indent = indents.get(key, 0)
        text = line.text[indent:] if line.text[:indent].isspace() else line.text
        if frame := TRACEBACK_FRAME.match(text):
            open_frames[key].append(Frame(frame["function"], frame["file"], int(frame["line"])))
            after_frame.add(key)
        elif (exception := EXCEPTION_LINE.match(text)) or (
                key in after_frame and open_frames[key] and (exception := ANY_EXCEPTION_LINE.match(text))):
            found.append(Traceback(line.node, line.rank, exception["type"], (exception["message"] or "").strip(),
                                   line, open_frames.pop(key), threads.pop(key, None)))
            after_frame.discard(key)
        elif not text[:1].isspace():
            after_frame.discard(key)
    return [tb for tb in found if not tb.exc_type.endswith("ChildFailedError")]  # torchrun's own summary


def failure_report_ranks(lines: list[LogLine]) -> dict[int, list[tuple[int, int]]]:
    """node -> [(rank, exit code)] from torchrun's failure reports, root cause first."""
    reports: dict[int, list[tuple[int, int]]] = {}
    pending: dict[int, int] = {}
    root_cause = set()
    for line in lines:
        if line.text.startswith("Root Cause"):
            root_cause.add(line.node)
        if match := REPORT_RANK.match(line.text):
            pending[line.node] = int(match["rank"])
        elif (match := REPORT_EXIT.match(line.text)) and line.node in pending:
            entry = (pending.pop(line.node), int(match["code"]))
            if line.node in root_cause:
                reports.setdefault(line.node, []).insert(0, entry)
                root_cause.discard(line.node)
            else:
                reports.setdefault(line.node, []).append(entry)
    return reports


def collective_in(frames: list[Frame]) -> tuple[str | None, Frame | None]:
    collective = next((frame.function for frame in reversed(frames)
                       if frame.file.endswith("distributed_c10d.py") and not frame.function.startswith("_")), None)
    own = [frame for frame in frames if not LIBRARY_FILE.search(frame.file)]
    return collective, own[-1] if own else None


OUTPUT_SHOWN = 70  # characters of a rank's last line of output
# What torch, gloo and torchrun print about a run rather than the job's own words (torchrun's failure report too:
# its rules, headings and "SCRIPT FAILED").
NOT_THE_JOBS_OWN = re.compile(r"^\[[WEIF]\d{4} |^frame #\d+|^Exception raised from|^\s+File \"|^\s|torch\.distributed\."
                              r"elastic|^WARNING:|^W\d{4} |^E\d{4} |^I\d{4} |^\*{5}|^<omitting python frames>"
                              r"|^[=-]{20,}$|^Failures:$|^Root Cause \(|^\[\d+\]:$|^<NO_OTHER_FAILURES>$| FAILED$")


def last_own_line(texts: list[str]) -> str | None:
    """The last line a rank printed itself, before any traceback, without torch's and torchrun's own lines."""
    own, in_traceback = [], False
    for text in texts:
        if text.strip() == TRACEBACK_START:
            in_traceback = True
        elif in_traceback and EXCEPTION_LINE.match(text):
            in_traceback = False
        elif not in_traceback and text.strip() and not NOT_THE_JOBS_OWN.search(text) \
                and not EXCEPTION_LINE.match(text):
            own.append(text.strip())
    if not own:
        return None
    last = own[-1]
    return last if len(last) <= OUTPUT_SHOWN else last[:OUTPUT_SHOWN] + "..."


def exit_text(code: int | None) -> str:
    """An exit status as a person reads it: 'exit 1', 'SIGKILL' (-9 from Popen), 'exit 137 (SIGKILL)' (a shell's)."""
    if code is None:
        return "stopped by the lab"
    number = -code if code < 0 else code - 128 if code > 128 else None
    try:
        name = signal.Signals(number).name if number else None
    except ValueError:
        name = None
    if code < 0:
        return name or f"signal {-code}"
    return f"exit {code}" + (f" ({name})" if name else "")
