"""Run an exercise's steps across the nodes, inject its faults, check it, and keep a record.

Each step is one `launch()` (launch.py: stream every node's output, enforce the timeout); the runner
adds what makes it an exercise: the step's commands, its fault, the checks. It always leaves a run
record (record.py), also for runs that failed, timed out or were interrupted.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lab.analysis.explain import JobFacts, explain_launch, failed_checks_finding, launch_failed
from lab.analysis.record import RunRecord, StepRecord, recording
from lab.jobs.checks import Check, RunOutcome, StepOutcome, exited_cleanly
from lab.jobs.exercises import FAULT_KILL_MODES, Exercise, LaunchContext, Step, step_command, step_timeout
from lab.jobs.launch import FAILED_NODE_GRACE, Reporter, launch
from lab.jobs.probes import ask_nodes
from lab.jobs.transports import Transport

if TYPE_CHECKING:  # targets.py runs exercises through this module
    from lab.jobs.targets import Target


@dataclass
class RunOptions:
    """What the user chose for a run; where it runs, and what those nodes are, is the Target's."""

    nproc_per_node: int | None = None
    backend: str = "auto"
    timeout: int | None = None
    master_port: int | None = None  # None: 29500, or a free port when that is taken
    fail_grace: float | None = FAILED_NODE_GRACE  # stop this long after every process of a node failed (None: never)


def run_exercise(exercise: Exercise, target: Target, options: RunOptions, reporter: Reporter) -> RunRecord:
    nproc = options.nproc_per_node or exercise.nproc_per_node
    record = RunRecord.new(exercise.name, target.label)
    outcome = RunOutcome(nnodes=target.nnodes, nproc_per_node=nproc, backend=options.backend, link=target.link)
    host_run_dir = target.transport.host_shared_dir / "runs" / record.run_id
    findings: list[dict] = []
    with recording(record):
        for step in exercise.steps:
            reporter.event(f"{exercise.name} step '{step.name}' on {target.nnodes} node(s) x {nproc} process(es)")
            stacks_dir = record.stacks_dir if len(exercise.steps) == 1 else record.stacks_dir / step.name
            step_outcome, step_record, step_findings = _run_step(exercise, step, target, options, nproc,
                                                                 record.run_id, reporter, stacks_dir)
            outcome.steps[step.name] = step_outcome
            record.steps.append(step_record)
            findings += step_findings
            record.save_logs(step.name, step_outcome.logs)
            record.save_results(step.name, host_run_dir / "results" / step.name)
        record.checks = _checks(exercise, outcome)
        record.draw_curves()
        record.status = "passed" if all(check.passed for check in record.checks) else "failed"
        if not record.passed:
            record.diagnosis = findings or [finding for finding in [failed_checks_finding(record.checks)] if finding]
    return record


def _run_step(exercise: Exercise, step: Step, target: Target, options: RunOptions, nproc: int,
              run_id: str, reporter: Reporter, stacks_dir: Path) -> tuple[StepOutcome, StepRecord, list[dict]]:
    transport, nnodes = target.transport, target.nnodes
    shared = transport.shared_dir
    port = transport.pick_port(options.master_port)
    results_dir = transport.host_shared_dir / "runs" / run_id / "results" / step.name
    results_dir.mkdir(parents=True, exist_ok=True)
    (transport.host_shared_dir / "runs" / run_id / "work").mkdir(parents=True, exist_ok=True)
    process_run_id = f"{run_id}-{step.name}"
    commands = {}
    for index in range(nnodes):
        ctx = LaunchContext(
            node_rank=index, nnodes=nnodes, nproc_per_node=nproc,
            master_addr=transport.master_addr, master_port=port, python=transport.python,
            exercises_dir=transport.exercises_dir,
            results_dir=f"{shared}/runs/{run_id}/results/{step.name}",
            work_dir=f"{shared}/runs/{run_id}/work",
            run_id=process_run_id, backend=options.backend,
        )
        commands[index] = step_command(exercise, step, ctx)
    timeout = options.timeout or step_timeout(exercise, step, nnodes, nproc)
    fault = dict(step.fault)
    injected = []

    def watch():
        if fault and not injected and _maybe_inject(fault, transport, process_run_id, run_id, reporter):
            injected.append(time.time())

    problems = []

    def on_timeout(exit_codes):
        problems.append(_timeout_message(step.name, timeout, nnodes * nproc, set(_read_results(results_dir)),
                                         exit_codes, nnodes))
        reporter.event(problems[-1])

    expendable = frozenset(node for node in [_killed_node(step)] if node is not None)
    result = launch(transport, commands, process_run_id, timeout, reporter, on_timeout, watch,
                    fail_grace=options.fail_grace, expendable=expendable, stacks_dir=stacks_dir)
    results = _read_results(results_dir)
    outcome = StepOutcome(step.name, results=results, exit_codes=result.exit_codes, logs=result.logs, expect=step.expect)
    step_record = StepRecord(step.name, expect=step.expect, exit_codes=result.exit_codes, timed_out=result.timed_out,
                             seconds=result.seconds, ranks_reported=sorted(results), oom_killed=result.oom_killed,
                             fault=fault or None, fault_injected=bool(injected),
                             problem=problems[0] if problems else result.stopped or None,
                             nproc_per_node=nproc, master_port=port, started_at=result.started_at,
                             node_exits=result.node_exits, stopped_at=result.stopped_at,
                             fault_at=injected[0] if injected else None,
                             hand_faults=result.hand_faults)
    findings = []
    if step.expect == "pass" and launch_failed(result, expendable):
        facts = JobFacts(target.hostnames, nproc, options.backend, transport.master_addr, port, target.node_gpus,
                         target.memory_limit, tuple(step.env), tuple(commands[0][0]) if 0 in commands else ())
        faults = transport.faults() + ([(int(fault.get("node", 1)), fault.get("action", "kill-worker"))] if injected else [])
        probes = ask_nodes(transport, commands, result.logs, None, target.workspace)
        step_record.probes = probes.to_dict()
        findings = explain_launch(result, facts, faults, step.name if len(exercise.steps) > 1 else None, probes)
    return outcome, step_record, findings


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


def check_results(exercise: Exercise, nnodes: int, nproc_per_node: int, results_root: Path) -> list[Check]:
    """The exercise's checks on results a job left in `results_root/<step>/` without the lab's launcher (sbatch, pods)."""
    outcome = RunOutcome(nnodes=nnodes, nproc_per_node=nproc_per_node)
    for step in exercise.steps:
        outcome.steps[step.name] = StepOutcome(step.name, results=_read_results(results_root / step.name),
                                               expect=step.expect)
    return _checks(exercise, outcome)


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
