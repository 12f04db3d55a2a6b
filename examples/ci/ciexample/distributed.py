"""Helpers over an initialised torch.distributed process group."""

from __future__ import annotations

import torch
import torch.distributed as dist


def all_mean(tensor: torch.Tensor) -> torch.Tensor:
    """The element-wise mean of `tensor` over every rank, in place."""
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    tensor /= dist.get_world_size()
    return tensor


def shard(items: list, rank: int | None = None, world_size: int | None = None) -> list:
    """This rank's share of `items`: every world_size-th item from its global rank on."""
    rank = dist.get_rank() if rank is None else rank
    world_size = dist.get_world_size() if world_size is None else world_size
    return items[rank::world_size]


def gather_objects(obj) -> list:
    """`obj` of every rank, in rank order, on every rank."""
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered
