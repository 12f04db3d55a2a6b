"""Multi-node training whose node leaders (local rank 0) share the dataset cache's state through a small store.

One process per node prepares the node's cache; the leaders publish how many records each node cached, and every
node leader checks that the caches agree before training starts.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def prepare_node_cache(node):
    g = torch.Generator().manual_seed(0)
    return torch.randn(2048, 12, generator=g)


def check_node_caches(node, nnodes, records, timeout):
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 2,
                          world_size=dist.get_world_size(), is_master=(node == 0), timeout=timeout)
    store.set(f"cached/{node}", str(records))
    counts = [int(store.get(f"cached/{n}")) for n in range(nnodes)]
    if len(set(counts)) != 1:
        raise RuntimeError(f"node caches differ: {counts}")


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    node, nnodes = rank // local_world, world // local_world
    if local_rank == 0:
        cache = prepare_node_cache(node)
        check_node_caches(node, nnodes, len(cache), timeout)
    dist.barrier()
    cache = prepare_node_cache(node)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    mine = cache[local_rank::local_world]
    for i in range(0, len(mine), 128):
        x = mine[i:i + 128]
        loss = F.mse_loss(model(x), x[:, :2].sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"final loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
