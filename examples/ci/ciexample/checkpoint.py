"""A checkpoint written by one rank and read by all, with no filesystem the nodes share: rank 0 writes it and reads
it back, then sends what it read to the others."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist


def save(state: dict, path: str | Path) -> None:
    """Rank 0 writes `state` to `path` (its own disk); every rank waits until it is written."""
    if dist.get_rank() == 0:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, path)
    dist.barrier()


def load(path: str | Path) -> dict:
    """The state rank 0 saved at `path`, on every rank: read by rank 0, broadcast to the others."""
    box = [torch.load(path) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]
