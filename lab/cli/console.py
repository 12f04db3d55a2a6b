"""Console helpers for the CLI: the progress line, the live per-node printer, and the tables."""

from __future__ import annotations

import re
import signal
import sys
import threading
import time
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lab.model.spec import format_bytes


console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)


class UntilDone:
    """Ctrl-C interrupts a command until its work is done; from `done()` on it is ignored while the result prints.

    `lab up` calls `done()` at the moment its lab is whole: an interrupt one instant later must neither undo the
    lab nor end the command saying it was stopped (bench/trials.py caught exactly that under load).
    """

    def __init__(self) -> None:
        self.finished = False
        self.previous = None

    def done(self) -> None:
        self.finished = True

    def _on_sigint(self, signum, frame) -> None:
        if not self.finished:
            raise KeyboardInterrupt

    def __enter__(self) -> "UntilDone":
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *_) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


errors = Console(stderr=True, highlight=False, soft_wrap=True)


NODE_COLOURS = ["cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta"]


# A rank's tag at the start of a line: "[rank3]:" (torchrun --tee with the lab's template, torch's excepthook and C++
# logs), "[rank 3] " (the exercises' labkit.log), "[default1]:" (torchrun's own default tag: a local rank, shown "l1").
RANK_TAG = re.compile(r"\[rank ?(?P<rank>\d+)\]:? ?|\[default(?P<local_rank>\d+)\]:")


def split_rank(text: str) -> tuple[str, str]:
    """("r3", rest) for a line a rank tagged, ("", text) for others; stacked tags of one rank count once."""
    label = ""
    while match := RANK_TAG.match(text):
        found = f"r{match['rank']}" if match["rank"] is not None else f"l{match['local_rank']}"
        if label and found != label:
            break
        label, text = found, text[match.end():]
    return label, text


# What may differ between two lines that still say the same thing: when, and which address.
VOLATILE = re.compile(
    r"\d{4}-\d\d-\d\d[ T]?"  # a date
    r"|\d\d:\d\d:\d\d(?:[.,]\d+)?"  # a time of day
    r"|\b0x[0-9a-fA-F]+"  # a pointer or id
    r"|(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|(?<![\w:])(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}(?![\w:]))(?::\d+)?"
)
# A log record (c10d/glog "[W1123 ...]" or "W1123 ...", Python logging "WARNING:", a Python warning): its numbers
# (retry counts, pids, line numbers) do not make it news. A program's own lines ("epoch 2: loss 0.41") keep theirs.
LOG_RECORD = re.compile(r"^\[[IWEF][\d ]|^[IWEF]\d{4} |^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)[: ]|\w+Warning: ")


def repeat_key(text: str) -> str:
    """`text` without what varies between repeats of one message: lines with the same key count as repeats."""
    key = VOLATILE.sub("#", text)
    return re.sub(r"\d+", "#", key) if LOG_RECORD.search(key) else key


class StatusLine:
    """Progress callback for long work: a spinner line on a terminal, timestamped lines in a log.

    Without a terminal (CI, `| tee`) a line is printed when the phase changes or every LOG_EVERY seconds,
    so a build log shows it is alive without copying every line of pip and docker. A line waits GRACE
    seconds before it is printed (sooner if the next one arrives), so work that fails at once ends
    with its one-line error alone.
    """

    LOG_EVERY = 10.0
    GRACE = 2.0

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.status = None
        self.last_phase, self.last_time = "", 0.0
        self.started = time.monotonic()
        self.pending_line: str | None = None
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None

    def __enter__(self):
        if not self.quiet and errors.is_terminal:
            self.status = errors.status("starting", spinner="dots")
            self.status.__enter__()
        return self

    def __call__(self, message: str) -> None:
        if self.quiet:
            return
        if self.status is not None:
            self.status.update(escape(message[:150]))
            return
        phase, now = message.split(":", 1)[0], time.monotonic()
        if phase != self.last_phase or now - self.last_time >= self.LOG_EVERY:
            if self.timer is not None:
                self.timer.cancel()  # its line is printed just below; it must not fire early on the next one
            self._print_pending()  # a next phase means the work is under way: show the last one now
            with self.lock:
                self.pending_line = f"[{now - self.started:6.1f} s] {message[:200]}"
            self.timer = threading.Timer(self.GRACE, self._print_pending)
            self.timer.daemon = True
            self.timer.start()
            self.last_phase, self.last_time = phase, now

    def _print_pending(self) -> None:
        with self.lock:
            line, self.pending_line = self.pending_line, None
            if line is not None:
                errors.print(line, markup=False, highlight=False)

    def __exit__(self, *exc):
        with self.lock:
            self.pending_line = None
        if self.timer is not None:
            self.timer.cancel()
        if self.status is not None:
            self.status.__exit__(*exc)


@dataclass
class PrintedLine:
    """The last line printed for one node and rank, and how many repeats of it were folded since."""

    key: str
    text: str
    printed_at: int  # LiveReporter.printed once it was printed
    repeats: int = 0


class LiveReporter:
    """Prints each node's output with a coloured node (and rank) prefix, and folds repeated lines.

    A line that repeats the previous line of the same node and rank (see repeat_key) is counted, not printed: one
    "(repeated N more times)" line follows when that rank prints something else, at the next event, or at the end
    (use the reporter as a context manager); it names the line again when others were printed in between. The run
    record keeps every line; this is only what the console shows.
    """

    REMINDER = 60  # characters of the repeated line a late count quotes

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.last: dict[tuple[int, str], PrintedLine] = {}  # (node, rank label) -> its last printed line
        self.printed = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.flush()

    def line(self, node: int, text: str) -> None:
        if self.quiet:
            return
        label, text = split_rank(text)
        source, key = (node, label), repeat_key(text)
        last = self.last.get(source)
        if last is not None and last.key == key:
            last.repeats += 1
            return
        self._print_repeats(source)
        self._print(source, text)
        self.last[source] = PrintedLine(key, text, self.printed)

    def event(self, text: str) -> None:
        """Events (timeouts, faults, OOM kills) are shown even when quiet: on stderr, so --json stays clean."""
        self.flush()
        (errors if self.quiet else console).print(f"[bold]>> {escape(text)}[/]", highlight=False)

    def flush(self) -> None:
        """Show the count of every folded run of repeats; what follows starts afresh."""
        for source in list(self.last):
            self._print_repeats(source)

    def _print_repeats(self, source: tuple[int, str]) -> None:
        last = self.last.pop(source, None)
        if last is None or not last.repeats:
            return
        count = f"repeated {last.repeats} more time{'s' if last.repeats > 1 else ''}"
        if last.printed_at != self.printed:  # other lines came between: say which line repeated
            quoted = last.text if len(last.text) <= self.REMINDER else last.text[:self.REMINDER - 3] + "..."
            count += f": {quoted}"
        self._print(source, f"({count})", style="dim")

    def _print(self, source: tuple[int, str], text: str, style: str | None = None) -> None:
        node, label = source
        prefix = f"node{node} {label}".rstrip()
        console.print(f"[{NODE_COLOURS[node % len(NODE_COLOURS)]}]{prefix:>9} |[/] ", end="")
        console.print(text, markup=False, highlight=False, style=style, soft_wrap=True)  # a long line stays one line
        self.printed += 1


def print_nodes(nodes) -> None:
    nodes = [node if isinstance(node, dict) else node.to_dict() for node in nodes]
    shaped = any("link" in node for node in nodes)  # `lab up --link`: how each node's link is shaped now
    table = Table(box=None, pad_edge=False)
    for column in ("node", "hostname", "ip", "state", "cpus", "memory", "gpus", "ssh", "faults") + ("link",) * shaped:
        table.add_column(column)
    for node in nodes:
        table.add_row(f"node{node['index']}", node["hostname"], node["ip"] or "-", node["state"],
                      f"{node['cpus']:g}" if node["cpus"] else "host", format_bytes(node["memory"]) if node["memory"] else "host",
                      ",".join(node["gpus"]) or "none", f"127.0.0.1:{node['ssh_port']}" if node["ssh_port"] else "-",
                      ",".join(node["faults"]) or "-", *([node.get("link", "-")] if shaped else []))
    console.print(table)


def print_provision(result) -> None:
    for node in result.nodes:
        console.print(("[green]ok[/] " if node.ok else "[red]FAILED[/] ") + node.summary(), highlight=False)
    console.print(f"[dim]provisioned in {result.seconds:.1f} s; ansible log: {result.log}[/]")


def print_checks(record) -> None:
    table = Table(title=f"{record.exercise} ({record.run_id})", title_justify="left", box=None, pad_edge=False)
    table.add_column("result")
    table.add_column("check")
    table.add_column("detail")
    for check in record.checks:
        table.add_row("[green]PASS[/]" if check.passed else "[red]FAIL[/]", escape(check.name), escape(check.detail))
    console.print(table)
    verdict = "[green]PASSED[/]" if record.passed else f"[red]{record.status.upper()}[/]"
    console.print(f"{record.exercise}: {verdict} in {record.seconds:.1f} s; record: {record.path}")



def print_diagnosis(record, verbose: bool = False) -> None:
    """The top finding of a run that did not pass (every finding with `verbose`), after its checks."""
    if record.passed or not record.diagnosis:
        return
    from lab.analysis.diagnosis import Finding, format_findings  # its rules load only for a run that failed

    findings = [Finding.from_dict(finding) for finding in record.diagnosis]
    console.print("[bold]why:[/]")
    console.print(format_findings(findings, verbose), markup=False, highlight=False)
    if not verbose:
        console.print(f"[dim]all findings: `lab explain {record.run_id}`; stacks and logs: {record.path}[/]")


def exit_codes_text(exit_codes: dict) -> str:
    """'node0=0, node1=killed': None is a process the lab stopped (timeout, early stop) or that never reported."""
    return ", ".join(f"node{node}={'killed' if code is None else code}" for node, code in sorted(exit_codes.items()))
