"""`lab_cluster`: a test runs jobs on its lab as `lab torchrun` and `lab exec` do, and asserts on what came of them."""

from __future__ import annotations

from pathlib import Path

from lab.jobs import adhoc
from lab.jobs.targets import Target
from lab.testing.ranks import FAIL_GRACE, Quiet
from lab.testing.results import JobResult, job_result


class LabCluster:
    """The nodes of one lab, for one test: `torchrun(script)`, `module(name)`, `exec(command)`; each returns a
    JobResult (every rank's exit code and output, the run's folder, the diagnosis). A failed job is a result, not an
    exception: the test says what it expected."""

    def __init__(self, target: Target, timeout: float):
        self.target = target
        self.timeout = timeout

    @property
    def name(self) -> str:
        return self.target.label

    @property
    def hostnames(self) -> tuple[str, ...]:
        return self.target.hostnames

    @property
    def nnodes(self) -> int:
        return self.target.nnodes

    @property
    def shared(self) -> Path:
        """The folder every node sees at /lab/shared, as this host sees it."""
        return self.target.transport.host_shared_dir

    @property
    def workspace(self) -> str | None:
        return self.target.workspace

    def torchrun(self, script: str | Path, *args: str, nproc_per_node: int = 1, env: dict[str, str] | None = None,
                 timeout: float | None = None, rdzv: str = "static", fail_grace: float = FAIL_GRACE) -> JobResult:
        """`lab torchrun SCRIPT ARGS`: a script in the workspace runs where it is; another one's folder is copied."""
        return self._torchrun(Path(script), [str(arg) for arg in args], nproc_per_node, env, timeout, rdzv, fail_grace)

    def module(self, name: str, *args: str, nproc_per_node: int = 1, env: dict[str, str] | None = None,
               timeout: float | None = None, rdzv: str = "static", fail_grace: float = FAIL_GRACE) -> JobResult:
        """`lab torchrun -m NAME ARGS`, from the workspace."""
        return self._torchrun(Path("-m"), [name, *map(str, args)], nproc_per_node, env, timeout, rdzv, fail_grace)

    def exec(self, command: list[str], nodes: list[int] | None = None, env: dict[str, str] | None = None,
             copy: str | Path | None = None, timeout: float | None = None, fail_grace: float = FAIL_GRACE) -> JobResult:
        """`lab exec -- COMMAND` on `nodes` (default every node), with {rank}, {node_rank}, ... filled in per node.
        `fail_grace`, as `--fail-grace`: once every process of a node failed, the others are stopped this much later
        (0: they run to the timeout)."""
        record = adhoc.run_exec(self.target, nodes, list(command), dict(env or {}), Path(copy) if copy else None,
                                int(timeout or self.timeout), Quiet(), fail_grace=fail_grace or None)
        return job_result(record)

    def _torchrun(self, script: Path, args: list[str], nproc_per_node: int, env: dict[str, str] | None,
                  timeout: float | None, rdzv: str, fail_grace: float) -> JobResult:
        record = adhoc.run_torchrun(self.target, nproc_per_node, rdzv, script, args, dict(env or {}),
                                    int(timeout or self.timeout), Quiet(), fail_grace=fail_grace or None)
        return job_result(record)
