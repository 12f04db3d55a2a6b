"""`lab bench`: the benchmarks in bench/ of a checkout (not in an installed package), which time `lab` end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lab.errors import RunError, SpecError
from lab import paths

BENCH_SCRIPT = paths.REPO_ROOT / "bench" / "run.py"
PARTS = ("up", "memory", "allreduce", "exercise03", "links", "jobs", "overhead", "packages", "forecast")
DEFAULT_PARTS = tuple(part for part in PARTS if part != "forecast")  # forecast (half an hour) only when named


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
    if not (paths.in_checkout() and BENCH_SCRIPT.is_file()):  # an installed package ships no bench/
        raise RunError(f"`lab bench` needs bench/run.py of a checkout of the lab repository; the lab at "
                       f"{paths.PACKAGE_DIR} has none (installed packages do not ship bench/)",
                       "in a checkout: `make setup`, then `make bench` (or `.venv/bin/lab bench`)")
    code = subprocess.run(argv, cwd=paths.REPO_ROOT).returncode
    if code != 0:
        raise RunError(f"the benchmarks stopped with exit code {code}",
                       "the output above says where; a lab it left behind goes with `lab down --name NAME`")
