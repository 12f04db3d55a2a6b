"""Exercise 02: each node starts K workers with torch.multiprocessing.spawn.

The node process is not part of the group; it only spawns K = NPROC_PER_NODE workers.
Worker `local_rank` on node `node_rank` takes global rank node_rank * K + local_rank, so
ranks are contiguous per node. An all_gather shows every rank where each peer lives.
"""

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import labkit


def worker(local_rank: int, node_rank: int, nproc: int, nnodes: int) -> None:
    rank = node_rank * nproc + local_rank
    world_size = nnodes * nproc
    backend, device = labkit.init(rank=rank, world_size=world_size, local_rank=local_rank)
    identity = torch.tensor([rank, node_rank], dtype=torch.int64, device=device)
    gathered = [torch.zeros_like(identity) for _ in range(world_size)]
    dist.all_gather(gathered, identity)
    total = torch.tensor([rank], dtype=torch.int64, device=device)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    labkit.log(rank, f"local rank {local_rank} on node {node_rank}; all_reduce sum of ranks = {total.item()}")
    labkit.write_result(rank, local_rank=local_rank, world_size=dist.get_world_size(), backend=backend,
                        gathered=[pair.tolist() for pair in gathered], all_reduce_sum=total.item())
    labkit.finish()


def main() -> None:
    nproc = labkit.nproc_per_node()
    mp.spawn(worker, args=(labkit.node_rank(), nproc, labkit.nnodes()), nprocs=nproc, join=True)


if __name__ == "__main__":
    main()
