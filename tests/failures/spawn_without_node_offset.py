"""One launcher per machine spawns a worker per core (mp.spawn) and gives each its index as the rank: right on one
machine, but on two every node has a rank 0 and 1, and ranks 2 and 3 never come (the world size, 2 x NNODES, is
right). Run with `lab exec`: the lab launches one process per node, the script starts the others."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(index: int, nprocs: int, nnodes: int) -> None:
    dist.init_process_group("gloo", rank=index, world_size=nprocs * nnodes,  # the bug: rank = index, no node offset
                            timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
    value = torch.ones(2)
    dist.all_reduce(value)
    print(f"rank {index}: {value.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2, int(os.environ["NNODES"])), nprocs=2)
