"""Rank 0 splits the evaluation prompts into one chunk per rank and scatters them; every rank scores its chunk."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def chunked(prompts, world):
    per = len(prompts) // world
    return [prompts[i * per:(i + 1) * per].clone() for i in range(world)]


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    gen = torch.Generator().manual_seed(0)
    prompts = torch.randint(0, 1000, (64, 16), generator=gen)   # every rank can build the same table
    my_chunk = torch.empty(64 // world, 16, dtype=torch.long)
    dist.scatter(my_chunk, scatter_list=chunked(prompts, world), src=0)
    score = torch.tensor([float(my_chunk.float().mean())])
    dist.all_reduce(score)
    if rank == 0:
        print(f"mean token id over {world} chunks: {score.item() / world:.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
