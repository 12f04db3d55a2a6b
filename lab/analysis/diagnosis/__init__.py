"""Why a run failed or hung: findings drawn from what the run left behind.

A pure library (no Docker, no I/O): the runner gathers `Evidence` after a run (each node's exit code, OOM flag and
combined log; stack dumps when it took them; the launch facts and the lab's injected faults) and `diagnose()` returns
`Finding`s, the root cause first. The rules match torch's message families (c10d, gloo, NCCL, CUDA, torchrun, Python
tracebacks) rather than one script's text, and use the environment and the launch facts where they are known. They
live by family: addresses (rendezvous and network), divergence (ranks that disagree), resources (memory, shared
memory, GPUs), nodes (the nodes differ or lack what the job names: from what they answered after the run), crashes
(a process failing on its own) and endings (how a run ended when nothing more is known).
"""

from __future__ import annotations

from lab.analysis.diagnosis import addresses, crashes, divergence, endings, nodes, resources
from lab.analysis.diagnosis.context import Context, pattern_findings
from lab.analysis.diagnosis.evidence import Evidence, Fault, NodeEvidence, NodeProbes, evidence_from_launch
from lab.analysis.diagnosis.findings import Finding, findings_json, format_findings
from lab.analysis.diagnosis.logs import failure_report_ranks, read_lines, read_tracebacks

__all__ = ["Evidence", "Fault", "Finding", "NodeEvidence", "NodeProbes", "diagnose", "evidence_from_launch",
           "failure_report_ranks", "findings_json", "format_findings", "read_lines", "PRIORITY"]

# Causes, most specific / most likely root first.
PRIORITY = [
    "lab-fault", "out-of-memory", "master-addr-loopback", "master-addr-unresolvable", "wrong-service-on-port",
    "master-port-in-use", "socket-ifname-missing", "nccl-without-gpu", "duplicate-gpu", "shared-memory-exhausted",
    "rendezvous-path-not-shared", "executable-missing", "env-differs-between-nodes", "env-not-set",
    "file-on-some-nodes-only", "file-missing-everywhere", "package-missing-on-nodes", "package-version-differs",
    "import-error", "script-not-found", "bad-arguments",
    "process-group-not-initialized", "duplicate-rank", "late-rank", "world-size-mismatch", "ddp-parameter-mismatch",
    "ddp-unused-parameters", "shape-mismatch", "collective-mismatch", "rank-crashed", "uneven-collectives",
    "process-killed", "master-unreachable", "ranks-missing", "peer-lost", "collective-timeout", "timed-out", "stopped",
    "nonzero-exit",
]
# Causes that describe how a run ended rather than why.
SYMPTOMS = {"lab-fault", "ranks-missing", "peer-lost", "collective-timeout", "timed-out", "stopped", "nonzero-exit"}
PATTERNS = (*addresses.PATTERNS, *resources.PATTERNS, *divergence.PATTERNS, *crashes.PATTERNS)


def diagnose(evidence: Evidence) -> list[Finding]:
    """Findings for a failed or hung run, the root cause first; [] for a run that passed."""
    if not evidence.failed:
        return []
    lines = read_lines(evidence)
    ctx = Context(evidence, lines, read_tracebacks(lines), failure_report_ranks(lines), PATTERNS)
    found = (endings.fault_findings(ctx) + resources.memory_findings(ctx) + addresses.loopback_findings(ctx)
             + pattern_findings(ctx) + divergence.duplicate_rank_findings(ctx) + divergence.late_rank_findings(ctx)
             + divergence.world_size_findings(ctx) + divergence.collective_findings(ctx) + nodes.node_findings(ctx))
    found += (crashes.traceback_findings(ctx) + crashes.run_module_findings(ctx) + divergence.uneven_findings(ctx)
              + addresses.unreachable_findings(ctx) + endings.peer_lost_findings(ctx))
    found += endings.ending_findings(ctx)
    return _rank(found, ctx)


def _rank(found: list[Finding], ctx: Context) -> list[Finding]:
    """One finding per cause (its first evidence), ordered by cause; drop what the root causes already explain."""
    by_cause: dict[str, Finding] = {}
    for finding in found:
        by_cause.setdefault(finding.cause, finding)
    causes = set(by_cause)
    if causes - SYMPTOMS:
        causes.discard("nonzero-exit")  # a bare exit code adds nothing once a cause is known
    ordered = sorted((by_cause[cause] for cause in causes), key=lambda finding: PRIORITY.index(finding.cause))
    if ordered and ordered[0].cause == "lab-fault" and not endings.fault_explains(ctx):
        ordered.append(ordered.pop(0))
    return ordered
