"""`lab sbatch`: submit a batch script to a lab's Slurm cluster (`lab up --scheduler slurm`), follow it, record it.

The script is copied into the run's folder on the shared mount and submitted from node0 with that folder as
its working directory, so its output file lands where this host can read it. The job is followed with
`scontrol show job` (no accounting database in the lab); what Slurm says when a job cannot run or ends
badly (drained nodes, the time limit, an srun step it refused) becomes one line. A script from
`lab export slurm` is also checked like `lab run` checks the exercise.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from lab import paths
from lab.analysis.record import RunRecord, StepRecord, recording
from lab.errors import LabStateError, RunError, SpecError
from lab.jobs.checks import Check
from lab.jobs.exercises import find
from lab.jobs.launch import Reporter
from lab.jobs.runner import check_results
from lab.jobs.slurm import exercise_of
from lab.model.spec import EXERCISES_MOUNT, SHARED_MOUNT
from lab.nodes import lifecycle
from lab.nodes.slurm import SCHEDULER

POLL_SECONDS = 1.0
PENDING_LIMIT = 120  # seconds a job may wait for nodes that are all up before `lab sbatch` gives up on it
DEFAULT_TIMEOUT = 3600
FINISHED = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
            "DEADLINE"}
UNUSABLE_NODE = re.compile(r"^(drain|down|fail|maint|inval|future|reboot|power)|\*$")
FIELD = re.compile(r"(\S+?)=(\S*)")
SLURM_ERROR = re.compile(r"^(srun|sbatch|slurmstepd\S*): error: (.*)$", re.MULTILINE)


@dataclass
class NodeState:
    name: str
    state: str
    reason: str

    @property
    def usable(self) -> bool:
        return not UNUSABLE_NODE.search(self.state)


def parse_job(text: str) -> dict[str, str]:
    """`scontrol show job -o ID`: one line of Key=Value fields."""
    return dict(FIELD.findall(text.strip()))


def parse_nodes(text: str) -> list[NodeState]:
    """`sinfo -h -N -o %N|%T|%E`: each node with its state and the reason an admin (or Slurm) gave."""
    found = {}
    for line in text.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3:
            found[parts[0]] = NodeState(*parts)
    return list(found.values())


def pending_problem(job: dict[str, str], nodes: list[NodeState]) -> str | None:
    """Why a pending job can never start on these nodes, or None while it still can."""
    needed = int(re.match(r"\d+", job.get("NumNodes", "1")).group())
    usable = [node for node in nodes if node.usable]
    if needed <= len(usable):
        return None
    if needed > len(nodes):
        return f"job {job.get('JobId')} asks for {needed} node(s) but the cluster has {len(nodes)}"
    down = ", ".join(f"{node.name} {node.state}" + (f" ({node.reason})" if node.reason not in ("", "none") else "")
                     for node in nodes if not node.usable)
    return f"job {job.get('JobId')} needs {needed} node(s) but only {len(usable)} can run jobs: {down}"


def finished_problem(job: dict[str, str], output: str) -> str | None:
    """One line on how a finished job went wrong, from its state, exit code and Slurm's own errors; None if it did not."""
    state, code = job.get("JobState", ""), job.get("ExitCode", "0:0")
    if state == "COMPLETED" and code == "0:0":
        return None
    job_id = job.get("JobId")
    slurm_said = SLURM_ERROR.search(output)
    said = f"; {slurm_said.group(1)}: {slurm_said.group(2).strip()}" if slurm_said else ""
    if state == "TIMEOUT":  # slurmstepd's own line about it says no more
        return f"job {job_id} reached its time limit ({job.get('TimeLimit')}) and was stopped"
    if state == "OUT_OF_MEMORY":
        return f"job {job_id} ran out of memory{said}"
    if state == "NODE_FAIL":
        return f"job {job_id} lost a node ({job.get('NodeList')}){said}"
    status, _, signal = code.partition(":")
    how = f"signal {signal}" if signal not in ("", "0") else f"exit code {status}"
    return f"job {job_id} {state.lower()} with {how}{said}"


class SlurmNode:
    """Slurm's commands on one node of a lab, through the engine."""

    def __init__(self, driver, lab: str, index: int = 0):
        self.driver, self.lab, self.index = driver, lab, index

    def run(self, argv: list[str], hostname: str | None = None) -> tuple[int | None, str]:
        """argv on this node, or on node `hostname` of the lab (nodeI)."""
        index = int(hostname.removeprefix("node")) if hostname and hostname.startswith("node") else self.index
        return self.driver.exec_output(self.lab, index, argv)

    def job(self, job_id: str) -> dict[str, str]:
        code, output = self.run(["scontrol", "show", "job", "-o", job_id])
        if code != 0:
            raise RunError(f"Slurm no longer knows job {job_id}: {output.strip()[:200]}", "see `lab ssh node0` and sinfo")
        return parse_job(output)

    def nodes(self) -> list[NodeState]:
        return parse_nodes(self.run(["sinfo", "-h", "-N", "-o", "%N|%T|%E"])[1])


def slurm_lab(name: str) -> SlurmNode:
    """node0 of lab `name`, which must run Slurm."""
    driver, spec, _ = lifecycle.require(name)
    if spec.scheduler != SCHEDULER:
        raise LabStateError(f"lab '{name}' does not run Slurm",
                            f"start it with `lab up --nodes {spec.nodes} --scheduler slurm --recreate --name {name}`")
    return SlurmNode(driver, name)


def _node_file(path: str, host_shared: Path) -> Path | None:
    """The host path of a file a node wrote under the shared mount; None for a file elsewhere."""
    relative = Path(path).relative_to(SHARED_MOUNT) if path.startswith(f"{SHARED_MOUNT}/") else None
    return host_shared / relative if relative else None


def run_sbatch(name: str, script: Path, args: list[str], timeout: int | None, reporter: Reporter) -> RunRecord:
    """Submit `script ARGS` from node0 of lab `name`, follow it to the end, print its output, keep a record."""
    if not script.is_file():
        raise SpecError(f"script '{script}' not found", "give the path of a batch script on this machine")
    slurm = slurm_lab(name)
    host_shared = paths.lab_dir(name) / "shared"
    record = RunRecord.new("sbatch", name)
    run_dir = f"runs/{record.run_id}"
    (host_shared / run_dir).mkdir(parents=True, exist_ok=True)
    shutil.copy2(script, host_shared / run_dir / script.name)
    node_dir = f"{SHARED_MOUNT}/{run_dir}"
    # Submitted from the run's folder: that is the job's SLURM_SUBMIT_DIR and working directory.
    command = ["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", node_dir,
               "sbatch", "--parsable", f"--export=ALL,LAB_EXERCISES={EXERCISES_MOUNT}", script.name, *args]
    step = StepRecord("main", command=["sbatch", script.name, *args])
    record.steps = [step]
    with recording(record):
        code, output = slurm.run(command)
        if code != 0:
            said = SLURM_ERROR.search(output)
            raise RunError(f"sbatch refused the job: {said.group(2).strip() if said else output.strip()[-300:]}",
                           "see `lab ssh node0` then `sinfo`, and the #SBATCH lines of the script")
        job_id = output.strip().split(";")[0]
        reporter.event(f"submitted job {job_id} from node0 ({script.name})")
        job, out_text = _follow(slurm, job_id, host_shared, timeout or DEFAULT_TIMEOUT, reporter)
        step.seconds = job_seconds(job)
        batch_host = job.get("BatchHost", "node0")
        step.exit_codes = {int(batch_host.removeprefix("node")) if batch_host.startswith("node") else 0:
                           int(job.get("ExitCode", "0:0").split(":")[0] or 0)}
        record.save_logs("main", {0: out_text})
        problem = finished_problem(job, out_text)
        step.problem = problem
        record.checks = [Check(f"job {job_id} completed with exit code 0", problem is None, problem or "")]
        exercise = exercise_of(script.read_text(errors="replace"))
        if exercise is not None:
            record.checks += _exercise_checks(record, exercise, job, host_shared / run_dir / "lab-runs" / job_id)
        record.status = "passed" if all(check.passed for check in record.checks) else "failed"
        record.error = problem or ""
    return record


def _exercise_checks(record: RunRecord, exercise: tuple[str, int], job: dict[str, str], output: Path) -> list[Check]:
    """The exercise's own checks on the results the script left (LAB_OUTPUT's default in the run's folder)."""
    found = find(exercise[0])
    for step in found.steps:
        record.save_results(step.name, output / "results" / step.name)
    return check_results(found, int(job.get("NumNodes", "1")), exercise[1], output / "results")


def job_seconds(job: dict[str, str]) -> float:
    """RunTime ([D-]HH:MM:SS) in seconds."""
    days, _, clock = job.get("RunTime", "0:0:0").rpartition("-")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    return int(days or 0) * 86400 + hours * 3600 + minutes * 60 + seconds


def _follow(slurm: SlurmNode, job_id: str, host_shared: Path, timeout: int,
            reporter: Reporter) -> tuple[dict[str, str], str]:
    """Poll the job until it ends, streaming its output file; cancel it on Ctrl-C, at `timeout`, or when it cannot start."""
    deadline = time.monotonic() + timeout
    pending_since = time.monotonic()
    state, shown, out_path = "", 0, None
    try:
        while True:
            job = slurm.job(job_id)
            if job.get("JobState") != state:
                state = job.get("JobState", "")
                reason = job.get("Reason", "None")
                reporter.event(f"job {job_id}: {state}" + (f" ({reason})" if reason != "None" else "")
                               + (f" on {job['NodeList']}" if state == "RUNNING" else ""))
            out_path = _node_file(job.get("StdOut", ""), host_shared)
            shown = _stream(out_path, shown, reporter)
            if state in FINISHED:
                break
            if state == "PENDING":
                problem = pending_problem(job, slurm.nodes())
                if problem or time.monotonic() - pending_since > PENDING_LIMIT:
                    raise RunError(problem or f"job {job_id} still pending after {PENDING_LIMIT} s "
                                   f"({job.get('Reason')})", "see `lab ssh node0` then `sinfo -R` and `squeue`")
            else:
                pending_since = time.monotonic()
            if time.monotonic() > deadline:
                raise RunError(f"job {job_id} still {state.lower()} after {timeout} s", "pass a longer --timeout")
            time.sleep(POLL_SECONDS)
    except BaseException:
        slurm.run(["scancel", job_id])
        raise
    if out_path is None:  # written outside the shared folder: read it where the batch step ran
        out_text = slurm.run(["cat", job.get("StdOut", "/dev/null")], job.get("BatchHost"))[1]
        for line in out_text.splitlines():
            reporter.line(0, line)
    else:
        _stream(out_path, shown, reporter)
        out_text = out_path.read_text(errors="replace") if out_path.is_file() else ""
    return job, out_text


def _stream(path: Path | None, shown: int, reporter: Reporter) -> int:
    """Report the output file's complete lines past character `shown`; the new count."""
    if path is None or not path.is_file():
        return shown
    text = path.read_text(errors="replace")
    complete = text[:text.rfind("\n") + 1] if "\n" in text else ""
    for line in complete[shown:].splitlines():
        reporter.line(0, line)
    return max(shown, len(complete))
