"""`lab bench`: the benchmarks in bench/ of this checkout, which time the `lab` command itself end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lab.errors import RunError, SpecError
from lab.paths import REPO_ROOT

BENCH_SCRIPT = REPO_ROOT / "bench" / "run.py"
PARTS = ("up", "memory", "allreduce", "exercise03")


def bench_argv(parts: list[str], max_nodes: int, cold: bool, rounds: int, name: str, keep: bool,
               as_json: bool, results: Path | None = None) -> list[str]:
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        raise SpecError(f"unknown benchmark part(s): {', '.join(unknown) or '(none given)'}",
                        f"choose from {', '.join(PARTS)}, e.g. --only allreduce,memory")
    argv = [sys.executable, str(BENCH_SCRIPT), "--only", ",".join(parts), "--max-nodes", str(max_nodes),
            "--rounds", str(rounds), "--name", name]
    if results is not None:
        argv += ["--results", str(results)]
    return argv + ["--cold"] * cold + ["--keep"] * keep + ["--json"] * as_json


def run_bench(argv: list[str]) -> None:
    """Run bench/run.py with this interpreter; its tables stream through, results land in bench/results/."""
    if not BENCH_SCRIPT.is_file():
        raise SpecError(f"{BENCH_SCRIPT} is missing", "`lab bench` runs from a checkout of the lab repository")
    code = subprocess.run(argv, cwd=REPO_ROOT).returncode
    if code != 0:
        raise RunError(f"the benchmarks stopped with exit code {code}",
                       "the output above says where; a lab it left behind goes with `lab down --name NAME`")
