"""The rank side of lab's pytest plugin (lab/testing/): loaded with `-p lab_rank_pytest` by the `python -m pytest
NODEID` that the plugin starts with torchrun on every rank, for a test marked `@pytest.mark.lab`.

It initialises torch.distributed before the test (unless the marker says init=False), gives the `lab_rank` fixture
(where this body runs), and writes what pytest reported of the test into LAB_PYTEST_RESULTS/rank<RANK>.json, which
the plugin on the host reads back from the run's record. It runs on the nodes, where lab is not installed: pytest,
torch and the standard library only. The lab puts this folder on every job's PYTHONPATH (lab/jobs/exercises.py).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import socket
from typing import NamedTuple

import pytest

# The host plugin's marker and ini keys, declared here too, so a suite with --strict-markers or --strict-config runs
# the same in a rank (tests/unit/test_pytest_plugin.py checks that the two lists agree).
MARKERS = (
    "lab(nodes=2, nproc_per_node=1, timeout=None, init=True, backend=None, image=None, gpus=None, link=None, "
    "requirements=(), pip=()): run this test's body on every rank across the nodes of a lab",
    "lab_cluster(nodes=2, image=None, gpus=None, link=None, requirements=(), pip=()): the lab the lab_cluster "
    "fixture gives this test",
)
REPORTS: list[dict] = []  # this process runs one test: its phases, in order
INI_KEYS = ("lab_nodes", "lab_nproc_per_node", "lab_image", "lab_timeout", "lab_keep", "lab_requirements", "lab_pip",
            "lab_workspace", "lab_link", "lab_gpus", "lab_required", "lab_name_prefix")


class LabRank(NamedTuple):
    """Where a test body runs: torchrun's placement of this process, and the node's hostname."""

    rank: int
    local_rank: int
    node_rank: int
    world_size: int
    local_world_size: int
    hostname: str

    @classmethod
    def from_env(cls) -> LabRank:
        env = os.environ
        return cls(int(env.get("RANK", 0)), int(env.get("LOCAL_RANK", 0)), int(env.get("GROUP_RANK", 0)),
                   int(env.get("WORLD_SIZE", 1)), int(env.get("LOCAL_WORLD_SIZE", 1)), socket.gethostname())


def pytest_addoption(parser):
    for key in INI_KEYS:
        parser.addini(key, "lab's pytest plugin (read on the host; declared here so ranks accept it)")


def pytest_configure(config):
    for line in MARKERS:
        config.addinivalue_line("markers", line)


@pytest.fixture
def lab_rank() -> LabRank:
    """rank, local_rank, node_rank, world_size, local_world_size and hostname of the process running this body."""
    return LabRank.from_env()


@pytest.fixture(autouse=True)
def _lab_process_group(request):
    """torch.distributed initialised for a body marked lab (init=True): NCCL where every local rank has a GPU,
    else gloo, with the timeout the plugin passes (longer than the test's, so the lab stops a hang first)."""
    marker = request.node.get_closest_marker("lab")
    if marker is None or not marker.kwargs.get("init", True):
        yield
        return
    import torch
    import torch.distributed as dist

    rank = LabRank.from_env()
    backend = marker.kwargs.get("backend")
    if backend is None:
        gpus = torch.cuda.is_available() and torch.cuda.device_count() >= rank.local_world_size
        backend = "nccl" if gpus else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(rank.local_rank)
    timeout = datetime.timedelta(seconds=float(os.environ.get("LAB_PYTEST_PG_TIMEOUT", "300")))
    dist.init_process_group(backend, timeout=timeout)
    # Every rank past its whole set-up before any body runs: a rank whose body ends at once (no collective) would
    # otherwise leave while slower ranks still connect to it ("Gloo connectFullMesh failed ... closed by peer").
    dist.barrier()
    try:
        yield
    finally:
        dist.destroy_process_group()


def pytest_runtest_logreport(report):
    """Each phase of the test as the host needs it: outcome, the failure's text, how long it took."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line, reason)
        text = str(longrepr[2])
    else:
        text = without_pytest_frames(str(longrepr)) if longrepr is not None else ""
    REPORTS.append({"when": report.when, "outcome": report.outcome, "longrepr": text,
                       "duration": report.duration, "xfail": bool(getattr(report, "wasxfail", ""))})


# A frame of pytest or pluggy: its File line, its source line, and the line of carets under it (Python 3.11+).
PYTEST_FRAMES = re.compile(r'^  File "[^"]*/(?:_pytest|pluggy)/[^"]*", line \d+, in .*\n(?:    .*\n)?(?: *[\^~]+ *\n)?',
                           re.MULTILINE)


def without_pytest_frames(text: str) -> str:
    """A native traceback without the frames of pytest and pluggy that run every test: it starts at the test."""
    return PYTEST_FRAMES.sub("", text)


def pytest_collectreport(report):
    if report.failed:  # the test module does not import on this node: that is this rank's failure
        REPORTS.append({"when": "collect", "outcome": "failed", "longrepr": str(report.longrepr), "duration": 0,
                           "xfail": False})


def pytest_sessionfinish(session, exitstatus):
    folder = os.environ.get("LAB_PYTEST_RESULTS")
    if not folder:
        return
    rank = LabRank.from_env()
    reports = REPORTS
    if not reports and int(exitstatus) == 4:  # pytest found no such test (NODEID unknown here)
        reports.append({"when": "collect", "outcome": "failed", "longrepr": "pytest found no test with this id on "
                        f"{rank.hostname}", "duration": 0, "xfail": False})
    data = {**rank._asdict(), "exitstatus": int(exitstatus), "reports": reports}
    path = os.path.join(folder, f"rank{rank.rank}.json")
    with open(path + ".tmp", "w") as handle:
        json.dump(data, handle)
    os.replace(path + ".tmp", path)
