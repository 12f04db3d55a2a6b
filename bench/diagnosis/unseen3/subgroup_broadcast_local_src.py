"""Multi-node training where each node's first process reads the node's sample index and shares it with the
other processes of its node through a per-node process group."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

INDEX_SIZE = 4096


def node_groups(world, local_world):
    groups = []
    for node in range(world // local_world):
        groups.append(dist.new_group(list(range(node * local_world, (node + 1) * local_world))))
    return groups


def read_node_index(node):
    g = torch.Generator().manual_seed(node)
    return torch.randperm(INDEX_SIZE, generator=g)


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    node = rank // local_world
    my_group = node_groups(world, local_world)[node]

    if local_rank == 0:
        index = read_node_index(node)
    else:
        index = torch.empty(INDEX_SIZE, dtype=torch.long)
    dist.broadcast(index, src=0, group=my_group)
    my_samples = index[local_rank::local_world]
    print(f"rank {rank} (node {node}): {len(my_samples)} samples", flush=True)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for i in range(0, 512, 64):
        ids = my_samples[i:i + 64].float()
        x = torch.stack([torch.sin(ids * (k + 1) / INDEX_SIZE) for k in range(8)], dim=1)
        loss = F.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"final loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
