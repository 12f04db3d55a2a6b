"""Run an exercise's steps across the nodes, inject its faults, check it, and keep a record.

The runner streams every node's output through a Reporter (the CLI prints it), enforces
each step's timeout, and always leaves a run record under `.lab/runs/<id>/`, also for runs
that failed, timed out or were interrupted.
"""

from __future__ import annotations

import json
import queue
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Protocol

from lab import paths
from lab.jobs.checks import Check, RunOutcome, StepOutcome, exited_cleanly
from lab.errors import LabError
from lab.jobs.exercises import FAULT_KILL_MODES, Exercise, LaunchContext, Step, step_command
from lab.jobs.records import plot_curves
from lab.jobs.transports import Transport, pump

POLL_SECONDS = 0.2
GRACE_SECONDS = 15


class Reporter(Protocol):
    def line(self, node: int, text: str) -> None: ...
    def event(self, text: str) -> None: ...


@dataclass
class RunOptions:
    nnodes: int
    nproc_per_node: int | None = None
    backend: str = "auto"
    timeout: int | None = None
    lab_name: str = "default"
    master_port: int | None = None  # None: 29500, or a free port when that is taken


@dataclass
class RunRecord:
    run_id: str
    exercise: str
    lab: str
    path: Path
    checks: list[Check] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    status: str = "running"
    curves: Path | None = None
    error: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "exercise": self.exercise,
            "lab": self.lab,
            "status": self.status,
            "passed": self.passed,
            "seconds": round(self.seconds, 2),
            "steps": self.steps,
            "checks": [check.__dict__ for check in self.checks],
            "path": str(self.path),
            "curves": str(self.curves) if self.curves else None,
            "error": self.error or None,
        }


def new_run_id(label: str) -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")[:-3] + f"-{label}"


def run_exercise(exercise: Exercise, transport: Transport, options: RunOptions, reporter: Reporter) -> RunRecord:
    nproc = options.nproc_per_node or exercise.nproc_per_node
    run_id = new_run_id(exercise.name)
    record = RunRecord(run_id, exercise.name, options.lab_name, paths.runs_dir() / run_id)
    outcome = RunOutcome(nnodes=options.nnodes, nproc_per_node=nproc, backend=options.backend)
    host_run_dir = transport.host_shared_dir / "runs" / run_id
    with recording(record):
        for step in exercise.steps:
            reporter.event(f"{exercise.name} step '{step.name}' on {options.nnodes} node(s) x {nproc} process(es)")
            step_outcome, summary = _run_step(exercise, step, transport, options, nproc, run_id, reporter)
            outcome.steps[step.name] = step_outcome
            record.steps.append(summary)
            _save_step(record.path, host_run_dir, step_outcome)
        record.checks = _checks(exercise, outcome)
        record.curves = plot_curves(record.path)
        record.status = "passed" if all(check.passed for check in record.checks) else "failed"
    return record


@contextmanager
def recording(record: RunRecord):
    """Save `record` however its block ends: finished, interrupted, or stopped by a LabError."""
    started = time.monotonic()
    record.path.mkdir(parents=True, exist_ok=True)
    try:
        yield record
    except KeyboardInterrupt:
        record.status = "interrupted"
        raise
    except LabError as error:
        record.status, record.error = "error", error.message
        raise
    finally:
        record.seconds = time.monotonic() - started
        save_record(record)


@dataclass
class LaunchResult:
    exit_codes: dict[int, int | None]
    logs: dict[int, str]
    timed_out: bool
    seconds: float
    oom_killed: list[int] = field(default_factory=list)


def launch(transport: Transport, commands: dict[int, tuple[list[str], dict[str, str]]], process_run_id: str,
           timeout: float, reporter: Reporter, on_timeout: Callable[[dict], None] | None = None,
           watch: Callable[[], None] | None = None, cwd: str | None = None) -> LaunchResult:
    """Start one command per node, stream their output, and wait; kill everything at the timeout.

    `watch` is called while waiting (fault injection); `on_timeout` gets the exit codes seen so far.
    A node whose stream never ends (paused container, lost engine) is given up GRACE_SECONDS later.
    """
    events: queue.Queue = queue.Queue()
    logs: dict[int, list[str]] = {index: [] for index in commands}
    exit_codes: dict[int, int | None] = {}
    oom_before = {index: transport.oom_kills(index) for index in commands}
    started = time.monotonic()
    timed_out = False
    try:
        for index, (argv, env) in commands.items():
            process = transport.start(index, argv, {**env, "LAB_RUN_ID": process_run_id}, cwd)
            pump(process, lambda text, i=index: events.put(("line", i, text)),
                 lambda code, i=index: events.put(("exit", i, code)))
        while len(exit_codes) < len(commands):
            try:
                kind, index, payload = events.get(timeout=POLL_SECONDS)
                if kind == "line":
                    logs[index].append(payload)
                    reporter.line(index, payload)
                else:
                    exit_codes[index] = payload
            except queue.Empty:
                pass
            if watch:
                watch()
            elapsed = time.monotonic() - started
            if not timed_out and elapsed > timeout:
                timed_out = True
                if on_timeout:
                    on_timeout(dict(exit_codes))
                for index in commands:
                    transport.kill(index, process_run_id, "all")
            if timed_out and elapsed > timeout + GRACE_SECONDS:
                for index in commands:
                    exit_codes.setdefault(index, None)
    except BaseException:  # Ctrl-C, a node refusing to start: nothing of this launch may outlive it, on any node
        for index in commands:
            transport.kill(index, process_run_id, "all")
        raise
    if any(code is None for code in exit_codes.values()):
        transport.check_alive()
    oom_killed = [index for index, before in oom_before.items()
                  if before is not None and (transport.oom_kills(index) or 0) > before]
    for index in oom_killed:
        reporter.event(f"node{index}: a process was killed by the kernel for exceeding the node's memory limit (OOM)")
    return LaunchResult(exit_codes, {i: "\n".join(lines) for i, lines in logs.items()}, timed_out,
                        time.monotonic() - started, oom_killed)


def _run_step(exercise: Exercise, step: Step, transport: Transport, options: RunOptions, nproc: int,
              run_id: str, reporter: Reporter) -> tuple[StepOutcome, dict]:
    shared = transport.shared_dir
    port = transport.pick_port(options.master_port)
    results_dir = transport.host_shared_dir / "runs" / run_id / "results" / step.name
    results_dir.mkdir(parents=True, exist_ok=True)
    (transport.host_shared_dir / "runs" / run_id / "work").mkdir(parents=True, exist_ok=True)
    process_run_id = f"{run_id}-{step.name}"
    commands = {}
    for index in range(options.nnodes):
        ctx = LaunchContext(
            node_rank=index, nnodes=options.nnodes, nproc_per_node=nproc,
            master_addr=transport.master_addr, master_port=port, python=transport.python,
            exercises_dir=transport.exercises_dir,
            results_dir=f"{shared}/runs/{run_id}/results/{step.name}",
            work_dir=f"{shared}/runs/{run_id}/work",
            run_id=process_run_id, backend=options.backend,
        )
        commands[index] = step_command(exercise, step, ctx)
    timeout = options.timeout or step.timeout or exercise.timeout
    fault = dict(step.fault)
    injected = []

    def watch():
        if fault and not injected and _maybe_inject(fault, transport, process_run_id, run_id, reporter):
            injected.append(True)

    problems = []

    def on_timeout(exit_codes):
        problems.append(_timeout_message(step.name, timeout, options.nnodes * nproc, set(_read_results(results_dir)),
                                         exit_codes, options.nnodes))
        reporter.event(problems[-1])

    result = launch(transport, commands, process_run_id, timeout, reporter, on_timeout, watch)
    results = _read_results(results_dir)
    outcome = StepOutcome(step.name, results=results, exit_codes=result.exit_codes, logs=result.logs, expect=step.expect)
    summary = {"step": step.name, "expect": step.expect, "exit_codes": result.exit_codes, "timed_out": result.timed_out,
               "seconds": round(result.seconds, 2), "ranks_reported": sorted(results), "oom_killed": result.oom_killed,
               "fault": fault or None, "fault_injected": bool(injected), "problem": problems[0] if problems else None}
    return outcome, summary


def _maybe_inject(fault: dict, transport: Transport, process_run_id: str, run_id: str, reporter: Reporter) -> bool:
    trigger = transport.host_shared_dir / "runs" / run_id / "work" / fault.get("when_file", "")
    if not trigger.exists():
        return False
    node = int(fault.get("node", 1))
    action = fault.get("action", "kill-worker")
    killed = transport.kill(node, process_run_id, FAULT_KILL_MODES[action])
    reporter.event(f"fault: {action} on node{node} ({killed} process(es) killed) after {fault.get('when_file')} appeared")
    return True


def _timeout_message(step: str, timeout: float, world_size: int, reported: set[int], exit_codes: dict,
                     nnodes: int) -> str:
    missing_ranks = sorted(set(range(world_size)) - reported)
    still_running = [f"node{index}" for index in range(nnodes) if index not in exit_codes]
    exited = [f"node{index} (exit {code})" for index, code in sorted(exit_codes.items()) if code != 0]
    parts = [f"step '{step}' timed out after {timeout:g} s"]
    if missing_ranks:
        parts.append(f"ranks that never reported: {_ranges(missing_ranks)}")
    if exited:
        parts.append(f"nodes that failed early: {', '.join(exited)}")
    if still_running:
        parts.append(f"stopping {', '.join(still_running)}")
    return "; ".join(parts)


def _ranges(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers)) if len(numbers) < 8 else f"{numbers[0]}..{numbers[-1]} ({len(numbers)})"


def _read_results(folder: Path) -> dict[int, dict]:
    results = {}
    for path in sorted(folder.glob("rank*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text())
            results[int(data.get("rank", path.stem[4:]))] = data
        except (ValueError, OSError):
            continue
    return results


def _killed_node(step: Step | None) -> int | None:
    """The node a kill-node fault takes away on purpose: its exit status says nothing about the run."""
    fault = dict(step.fault) if step else {}
    return int(fault.get("node", 1)) if fault.get("action") == "kill-node" else None


def _checks(exercise: Exercise, outcome: RunOutcome) -> list[Check]:
    checks = []
    manifest_steps = {step.name: step for step in exercise.steps}
    for step in outcome.steps.values():
        if step.expect == "pass":
            checks.append(exited_cleanly(step, _killed_node(manifest_steps.get(step.name))))
    try:
        checks += list(exercise.load_checker()(outcome))
    except Exception as error:  # a checker crash on malformed results is a failed run, not a lab crash
        checks.append(Check("checker ran", False, f"{type(error).__name__}: {error}"))
    return checks


def save_logs(record_dir: Path, step_name: str, logs: dict[int, str]) -> None:
    logs_dir = record_dir / "logs"
    logs_dir.mkdir(parents=True, exist_ok=True)
    for index, text in logs.items():
        (logs_dir / f"node{index}-{step_name}.log").write_text(text + "\n")


def _save_step(record_dir: Path, host_run_dir: Path, step: StepOutcome) -> None:
    save_logs(record_dir, step.name, step.logs)
    source = host_run_dir / "results" / step.name
    if source.is_dir():
        shutil.copytree(source, record_dir / "results" / step.name, dirs_exist_ok=True)


def save_record(record: RunRecord) -> None:
    (record.path / "run.json").write_text(json.dumps(record.to_dict(), indent=2) + "\n")
    latest = paths.runs_dir() / "latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(record.path.name)
    except OSError:
        pass
