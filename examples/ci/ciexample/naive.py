"""Two functions as a team first wrote them. Every test on one host passes them: there every rank shares one disk,
and LOCAL_RANK equals RANK. Across nodes both are wrong (tests/test_known_bugs.py); checkpoint.py and
distributed.shard are the versions that work."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist

CHECKPOINT = Path(tempfile.gettempdir()) / "ciexample" / "last.pt"


def save_and_resume(state: dict, path: Path = CHECKPOINT) -> dict:
    """Rank 0 saves, every rank resumes from the file. Bug: the file is on rank 0's disk only."""
    if dist.get_rank() == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, path)
    dist.barrier()
    return torch.load(path)


def my_shard(items: list) -> list:
    """This process's share of `items`. Bug: LOCAL_RANK counts processes on one node, not in the job."""
    return items[int(os.environ["LOCAL_RANK"])::dist.get_world_size()]
