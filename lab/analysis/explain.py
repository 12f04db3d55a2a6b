"""The diagnosis of a run that did not pass, from what the lab holds: the launch's result, the nodes' facts,
what the job was asked to do and the faults in force. Findings go into the run record (`diagnosis`);
`lab run`/`exec`/`torchrun` print the top one and `lab explain` prints them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lab.jobs.checks import Check

if TYPE_CHECKING:
    from lab.analysis.diagnosis import NodeProbes
    from lab.jobs.launch import LaunchResult


@dataclass(frozen=True)
class JobFacts:
    """What the lab knows about the nodes and the job besides the launch's result."""

    hostnames: tuple[str, ...]
    nproc_per_node: int
    backend: str
    master_addr: str
    master_port: int
    node_gpus: tuple[tuple[str, ...], ...] | None = None
    memory_limit: str | None = None
    env: tuple[tuple[str, str], ...] = ()  # what the user added with --env
    command: tuple[str, ...] = ()  # the user's command line (exec/torchrun)


def launch_failed(result: LaunchResult, expendable: frozenset[int] = frozenset()) -> bool:
    """A launch that did not end well by itself: timed out, stopped, or some node exited non-zero."""
    return result.timed_out or bool(result.stopped) or any(
        code != 0 for index, code in result.exit_codes.items() if index not in expendable)


def explain_launch(result: LaunchResult, facts: JobFacts, faults: list[tuple[int, str]] = (),
                   step: str | None = None, probes: NodeProbes | None = None) -> list[dict]:
    """Findings about one launch, as the record keeps them (with the step's name for multi-step exercises);
    `probes`: what the nodes answered after it (lab/jobs/probes.py; their network interfaces among it)."""
    from lab.analysis.diagnosis import diagnose, evidence_from_launch  # its rules load only for a run that failed

    nnodes = len(facts.hostnames)
    evidence = evidence_from_launch(
        result, nnodes=nnodes, nproc_per_node=facts.nproc_per_node, backend=facts.backend,
        master_addr=facts.master_addr, master_port=facts.master_port,
        hostnames=dict(enumerate(facts.hostnames)), probes=probes,
        gpus={index: len(gpus) for index, gpus in enumerate(facts.node_gpus or ())},
        memory_limit=facts.memory_limit, faults=faults, env=dict(facts.env), command=list(facts.command),
        stopped=result.stopped, processes=[stack for stack in result.stacks if stack.pid is not None],
        traces=result.traces)
    return [{**finding.to_dict(), **({"step": step} if step else {})} for finding in diagnose(evidence)]


def failed_checks_finding(checks: list[Check]) -> dict | None:
    """When every process ended well but the results are wrong, the first failed check is the finding."""
    from lab.analysis.diagnosis import Finding

    failed = [check for check in checks if not check.passed]
    if not failed:
        return None
    first = failed[0]
    return Finding("wrong-results", "the job ran to its end, but its results failed the checks",
                   f"{first.name}: {first.detail}".rstrip(": "), None, None,
                   "`lab show` lists every check; the exercise's README says what each one expects").to_dict()
