"""What asking the nodes after a failed run costs, side by side on one running lab: `ask_nodes` (lab/jobs/probes.py,
for the logs of tests/unit/diagnosis_samples/file_on_one_node: 1 path, 3 commands) against what it replaced, an
`ls /sys/class/net` in each node in turn. Prints best and median of N rounds and the ratio of the medians.

    PYTHONPATH=$PWD .venv/bin/python bench/probe_cost.py LAB [ROUNDS]
"""

import statistics
import sys
import time
from pathlib import Path

from lab.jobs import targets
from lab.jobs.probes import ask_nodes

SAMPLE = Path(__file__).parents[1] / "tests" / "unit" / "diagnosis_samples" / "file_on_one_node"


def main(lab: str, rounds: int) -> None:
    target = targets.containers(lab)
    logs = {index: (SAMPLE / f"node{index}.log").read_text() for index in (0, 1)}
    commands = {index: (["python", "x.py"], {}) for index in range(target.nnodes)}

    def interfaces_one_by_one() -> None:
        for index in commands:
            process = target.transport.start(index, ["ls", "/sys/class/net"], {})
            list(process.lines())
            process.wait()

    probe, before = [], []
    for _ in range(rounds):
        started = time.monotonic()
        probes = ask_nodes(target.transport, commands, logs, "/lab/shared", None)
        probe.append(time.monotonic() - started)
        assert not any(node.error for node in probes.nodes), probes
        started = time.monotonic()
        interfaces_one_by_one()
        before.append(time.monotonic() - started)
    print(f"ask_nodes ({target.nnodes} nodes): best {min(probe):.3f} s, median {statistics.median(probe):.3f} s")
    print(f"ls /sys/class/net per node: best {min(before):.3f} s, median {statistics.median(before):.3f} s")
    print(f"ratio of medians {statistics.median(probe) / statistics.median(before):.2f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 7)
