"""Large-model style start-up: rank 0 builds real weights, the others build on the meta device and
receive rank 0's weights by broadcast (memory saving on the non-zero ranks)."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn


class Tower(nn.Module):
    def __init__(self, width=256, depth=4):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.norm(x)


def build_model(rank):
    if rank == 0:
        torch.manual_seed(0)
        return Tower()
    with torch.device("meta"):
        return Tower()


def sync_module_states(model):
    for tensor in list(model.parameters()) + list(model.buffers()):
        dist.broadcast(tensor.data, src=0)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    model = build_model(rank)
    sync_module_states(model)
    out = model(torch.randn(8, 256))
    print(f"rank {rank}: forward ok, {out.shape}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
