"""Where exercise03's time goes, containers vs native: start-up, training, shutdown, from output timestamps.

  python bench/profile_exercise03.py --name bench [--rounds 2]

Phases per run (seconds from launch): first line any rank prints (processes started, torch imported,
rendezvous done, process group up), the first and last epoch lines (training), and the end of the run.
Needs a 2-node lab NAME (`lab up --nodes 2 --name NAME`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab.jobs import targets  # noqa: E402
from lab.jobs.exercises import find  # noqa: E402


class Timeline:
    """Reporter that keeps (seconds since creation, text) for every line."""

    def __init__(self):
        self.started = time.monotonic()
        self.lines: list[tuple[float, str]] = []

    def line(self, node: int, text: str) -> None:
        self.lines.append((time.monotonic() - self.started, text))

    def event(self, text: str) -> None:
        pass

    def first(self, needle: str) -> float | None:
        return next((at for at, text in self.lines if needle in text), None)

    def last(self, needle: str) -> float | None:
        return next((at for at, text in reversed(self.lines) if needle in text), None)


def profile(name: str, on: str) -> dict:
    timeline = Timeline()
    target = targets.resolve(on, name, nodes=2 if on == targets.HOST else None)
    targets.run_exercises([find("exercise03")], target, None, "auto", None, timeline)
    return {"first output": timeline.first("] group rank"), "first epoch": timeline.first("epoch 0:"),
            "last epoch": timeline.last("epoch 5:"), "end": round(time.monotonic() - timeline.started, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", default="bench")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print("| on | first output (s) | first epoch (s) | last epoch (s) | end (s) | training (s) | load 1 min |")
    print("|---|---|---|---|---|---|---|")
    for _ in range(args.rounds):
        for on in (targets.CONTAINERS, targets.HOST):
            phases = profile(args.name, on)
            training = round(phases["last epoch"] - phases["first output"], 2) if phases["last epoch"] else None
            cells = [phases[key] if phases[key] is None else round(phases[key], 2)
                     for key in ("first output", "first epoch", "last epoch", "end")]
            print(f"| {on} | " + " | ".join(map(str, cells)) + f" | {training} | {os.getloadavg()[0]:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
