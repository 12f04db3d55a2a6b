"""Rank 0 builds the fixed-fanout sampled neighbour matrix for a graph, every rank receives it and computes mean-neighbour features."""
import os
import datetime
import torch
import torch.distributed as dist

NUM_NODES = 128
FANOUT = 5
FEAT = 8


def setup():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def sample_neighbours(seed):
    g = torch.Generator().manual_seed(seed)
    rows = torch.arange(NUM_NODES).repeat_interleave(FANOUT)
    cols = torch.randint(0, NUM_NODES, (NUM_NODES * FANOUT,), generator=g)
    vals = torch.full((NUM_NODES * FANOUT,), 1.0 / FANOUT)
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, (NUM_NODES, NUM_NODES)).coalesce()


def share_sampler(rank, world):
    if rank == 0:
        nbr = sample_neighbours(seed=2024)
    else:
        nbr = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (NUM_NODES, NUM_NODES))
    if world > 1:
        dist.broadcast(nbr, src=0)
    return nbr


def main():
    rank, world = setup()
    nbr = share_sampler(rank, world)
    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, FEAT)
    agg = torch.sparse.mm(nbr, x)
    mine = torch.arange(NUM_NODES)[rank::world]
    h = torch.cat([x[mine], agg[mine]], dim=1)
    print(f"rank {rank}: {len(mine)} nodes, feature norm {h.norm():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
