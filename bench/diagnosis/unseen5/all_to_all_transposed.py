"""Sequence-parallel attention (Ulysses style): activations sharded by sequence are exchanged with
all_to_all so that each rank holds all positions for a subset of heads."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

SEQ_PER_RANK, HEADS, HEAD_DIM = 32, 8, 16


def seq_to_head_parallel(x, world):
    # x: [heads, seq_local, dim] -> send head blocks, receive sequence blocks
    x = x.transpose(0, 1)                      # [seq_local, heads, dim]; heads along dim 1 now
    x = x.reshape(SEQ_PER_RANK, world, HEADS // world, HEAD_DIM).transpose(0, 1)
    out = torch.empty(world, SEQ_PER_RANK, HEADS // world, HEAD_DIM)
    dist.all_to_all_single(out, x)
    return out.reshape(world * SEQ_PER_RANK, HEADS // world, HEAD_DIM)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(rank)
    q = torch.randn(HEADS, SEQ_PER_RANK, HEAD_DIM, generator=g)
    q_full = seq_to_head_parallel(q, world)
    scores = torch.softmax(q_full @ q_full.transpose(-1, -2) / HEAD_DIM ** 0.5, dim=-1)
    print(f"rank {rank}: attention over {q_full.shape[0]} positions, {scores.shape}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
