"""Exercise wall times, this tree against an earlier revision, measured side by side in one session.

  python bench/exercise_times.py --base HEAD~1 --exercises 10,12 --rounds 2
  python bench/exercise_times.py --base main --exercises 4,10,12,14 --name timesA

The base revision is exported with `git archive` into a temporary folder, and each side gets a 2-node lab of its
own, brought up from its own code (the nodes mount that side's exercises/), under a LAB_HOME of its own. Rounds
interleave the sides (base, this tree, base, this tree, ...) so that load from other work on the machine falls on
both; each run's `--json` record gives the exercise's and every step's seconds. The table gives the median of each
side and their ratio, with `uptime`'s load before and after; bench/results/exercise_times.json keeps every run.
No timed asserts: a ratio measured side by side is what to read, and only on the same machine and load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "exercise_times.json"


def load() -> str:
    """`uptime`'s three load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cli(tree: Path, home: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """`lab ARGS` run from `tree`'s code, its state under `home`."""
    env = {**os.environ, "PYTHONPATH": str(tree), "LAB_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=timeout)


def export(revision: str, into: Path) -> None:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def timed_run(tree: Path, home: Path, lab: str, exercise: str) -> dict:
    started = time.monotonic()
    result = cli(tree, home, "run", exercise, "--name", lab, "--json", "--quiet")
    wall = time.monotonic() - started
    try:
        record = json.loads(result.stdout)
        record = record[0] if isinstance(record, list) else record
    except json.JSONDecodeError:
        record = {}
    return {"exercise": exercise, "wall_s": round(wall, 2), "status": record.get("status", f"rc {result.returncode}"),
            "run_id": record.get("run_id"), "steps": {s["step"]: s["seconds"] for s in record.get("steps", [])}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="HEAD", help="git revision to compare this tree with (default HEAD)")
    parser.add_argument("--exercises", default="10,12", help="comma-separated exercise numbers or names")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--name", default="times", help="lab names: NAME-base and NAME-new")
    parser.add_argument("--records", help="folder for each side's LAB_HOME, run records kept (default: a new one "
                                          "under the temporary folder, printed at the end)")
    args = parser.parse_args()
    exercises = [e.strip() for e in args.exercises.split(",") if e.strip()]

    with tempfile.TemporaryDirectory(prefix="exercise-times-") as scratch:
        base_tree = Path(scratch) / "base"
        base_tree.mkdir()
        export(args.base, base_tree)
        homes = Path(args.records or tempfile.mkdtemp(prefix="exercise-times-records-"))
        sides = {"base": (base_tree, homes / "home-base"), "new": (ROOT, homes / "home-new")}
        labs = {side: f"{args.name}-{side}" for side in sides}
        runs: list[dict] = []
        try:
            for side, (tree, home) in sides.items():
                up = cli(tree, home, "up", "--nodes", "2", "--name", labs[side])
                if up.returncode:
                    raise SystemExit(f"lab up {labs[side]} failed: {up.stderr.strip()[-400:]}")
            for round_number in range(args.rounds):
                for exercise in exercises:
                    for side in ("base", "new"):
                        tree, home = sides[side]
                        before = load()
                        run = timed_run(tree, home, labs[side], exercise)
                        run.update(side=side, round=round_number, load_before=before, load_after=load())
                        runs.append(run)
                        print(f"round {round_number} {exercise:>4} {side:<4} {run['wall_s']:7.1f} s  {run['status']:<7} "
                              f"load {before} -> {run['load_after']}  {run['steps']}", flush=True)
        finally:
            for side, (tree, home) in sides.items():
                cli(tree, home, "down", "--name", labs[side])

    print(f"\n{'exercise':<10} {'base (median s)':>16} {'new (median s)':>15} {'new/base':>9}")
    for exercise in exercises:
        medians = {side: statistics.median(r["wall_s"] for r in runs if r["exercise"] == exercise and r["side"] == side)
                   for side in ("base", "new")}
        print(f"{exercise:<10} {medians['base']:>16.1f} {medians['new']:>15.1f} {medians['new'] / medians['base']:>9.2f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"base": args.base, "records": str(homes), "runs": runs}, indent=1) + "\n")
    print(f"every run: {RESULTS.relative_to(ROOT)}; the runs' records: {homes}/home-*/runs/")


if __name__ == "__main__":
    main()
