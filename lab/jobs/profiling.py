"""What `lab forecast` needs, gathered while a profiled run ends (`lab torchrun --profile`, `lab run --profile`).

The job's processes write their profiled steps themselves (exercises/jobhooks/lab_profile.py, moved into the record by
launch()). Here, with the lab still up: the facts of the rehearsal (nodes, processes per node, link, CPU limit) and a
short calibration of the link between two of its nodes (playbooks/files/link_calibration.py), all into the record's
`profile/` folder, which lab/forecast/ reads and nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path

from lab import paths
from lab.jobs.launch import Reporter, launch
from lab.jobs.targets import Target

PROFILE_FOLDER = "profile"  # in a run record
FACTS_FILE = "lab.json"
CALIBRATION_SCRIPT = paths.resource("playbooks") / "files" / "link_calibration.py"
CALIBRATION_TIMEOUT = 180
CALIBRATION_PREFIX = "CALIBRATION "


class _Collector:
    """Keeps rank 0's CALIBRATION line; the rest of the calibration's output is the lab's business."""

    def __init__(self):
        self.result: dict | None = None
        self.lines: list[str] = []

    def line(self, node: int, text: str) -> None:
        self.lines.append(text)
        if text.startswith(CALIBRATION_PREFIX):
            self.result = json.loads(text[len(CALIBRATION_PREFIX):])

    def event(self, text: str) -> None:
        pass


def calibrate_link(target: Target, run_id: str) -> dict:
    """gloo all_reduce swept over sizes between node0 and node1 (one process each), and the CPU's reduction cost."""
    transport = target.transport
    port = transport.pick_port(None)
    script = CALIBRATION_SCRIPT.read_text()
    commands = {index: ([transport.python, "-c", script],
                        {"RANK": str(index), "WORLD_SIZE": "2", "MASTER_ADDR": transport.master_addr,
                         "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}) for index in (0, 1)}
    collector = _Collector()
    result = launch(transport, commands, f"{run_id}-calibration", CALIBRATION_TIMEOUT, collector)
    if collector.result is None:
        tail = " / ".join(collector.lines[-3:]) or f"exit codes {result.exit_codes}"
        return {"error": f"the link calibration gave no result: {tail[:300]}"}
    return collector.result


def gather_rehearsal(target: Target, record_path: Path, run_id: str, nproc_per_node: int, command: list[str],
                     reporter: Reporter, calibrate: bool = True) -> Path:
    """Write the rehearsal's facts and the link's calibration beside the processes' profiles; the folder. Without
    `calibrate` (a run only measured, as `lab bench` does at the sizes it checks a forecast against) no calibration."""
    folder = record_path / PROFILE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    facts = {"nodes": target.nnodes, "nproc_per_node": nproc_per_node, "link": target.link, "cpus": target.cpus,
             "lab": target.label, "command": command, "profiles": len(list(folder.glob("profile-*.json")))}
    if not calibrate:
        facts["calibration"] = {"error": "not taken: this run was only measured"}
    elif target.nnodes >= 2:
        reporter.event("profile: calibrating the link between node0 and node1 (all_reduce sizes swept, a few seconds)")
        facts["calibration"] = calibrate_link(target, run_id)
    else:
        facts["calibration"] = {"error": "a lab of one node has no link to calibrate"}
    (folder / FACTS_FILE).write_text(json.dumps(facts, indent=2) + "\n")
    return folder
