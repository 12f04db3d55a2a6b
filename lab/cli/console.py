"""Console helpers for the CLI: the progress line, the live per-node printer, and the tables."""

from __future__ import annotations

import re
import sys
import threading
import time

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lab.model.spec import format_bytes


console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)


errors = Console(stderr=True, highlight=False, soft_wrap=True)


NODE_COLOURS = ["cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta"]


RANK_PATTERN = re.compile(r"^\[rank (\d+)\]\s?")


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


class LiveReporter:
    """Prints each node's output with a coloured node (and rank) prefix."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def line(self, node: int, text: str) -> None:
        if self.quiet:
            return
        colour = NODE_COLOURS[node % len(NODE_COLOURS)]
        match = RANK_PATTERN.match(text)
        prefix = f"node{node}"
        if match:
            prefix += f" r{match.group(1)}"
            text = text[match.end():]
        console.print(f"[{colour}]{prefix:>9} |[/] ", end="")
        console.print(text, markup=False, highlight=False)

    def event(self, text: str) -> None:
        """Events (timeouts, faults, OOM kills) are shown even when quiet: on stderr, so --json stays clean."""
        (errors if self.quiet else console).print(f"[bold]>> {escape(text)}[/]", highlight=False)


def print_nodes(nodes) -> None:
    table = Table(box=None, pad_edge=False)
    for column in ("node", "hostname", "ip", "state", "cpus", "memory", "gpus", "ssh", "faults"):
        table.add_column(column)
    for node in nodes:
        node = node if isinstance(node, dict) else node.to_dict()
        table.add_row(f"node{node['index']}", node["hostname"], node["ip"] or "-", node["state"],
                      f"{node['cpus']:g}" if node["cpus"] else "host", format_bytes(node["memory"]) if node["memory"] else "host",
                      ",".join(node["gpus"]) or "none", f"127.0.0.1:{node['ssh_port']}" if node["ssh_port"] else "-",
                      ",".join(node["faults"]) or "-")
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

