import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

SPLIT_DIM = {"qkv.weight": 0, "qkv.bias": 0, "out.weight": 1, "fc1.weight": 0, "fc2.weight": 1}


class TPBlock(nn.Module):
    def __init__(self, d, tp):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d // tp)
        self.out = nn.Linear(d // tp, d, bias=False)
        self.fc1 = nn.Linear(d, 4 * d // tp, bias=False)
        self.fc2 = nn.Linear(4 * d // tp, d, bias=False)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1) @ v
        h = self.out(att)
        dist.all_reduce(h)
        x = x + h
        h = self.fc2(torch.relu(self.fc1(x)))
        dist.all_reduce(h)
        return x + h


def gather_full(module):
    """Consolidate the tensor-parallel shards into one full state dict (for export or resharding)."""
    world = dist.get_world_size()
    full = {}
    for name, shard in module.state_dict().items():
        parts = [torch.empty_like(shard) for _ in range(world)]
        dist.all_gather(parts, shard.contiguous())
        full[name] = torch.cat(parts, dim=0)
    return full


def load_resharded(module, full):
    world, rank = dist.get_world_size(), dist.get_rank()
    local = {name: t.chunk(world, dim=SPLIT_DIM[name])[rank].clone() for name, t in full.items()}
    module.load_state_dict(local)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, tp = dist.get_rank(), dist.get_world_size()
    d = 32
    torch.manual_seed(rank)
    block = TPBlock(d, tp)
    opt = torch.optim.AdamW(block.parameters(), lr=1e-3)
    torch.manual_seed(0)
    data = torch.randn(10, 4, 6, d)
    for x in data:
        loss = block(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    full = gather_full(block)
    if rank == 0:
        torch.save(full, "block_full.pt")
        print({k: tuple(v.shape) for k, v in full.items()}, flush=True)
    dist.barrier()

    restored = TPBlock(d, tp)
    load_resharded(restored, torch.load("block_full.pt", weights_only=True) if rank == 0 else full)
    with torch.no_grad():
        a, b = block(data[0]), restored(data[0])
    err = (a - b).abs().max()
    dist.all_reduce(err, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"reshard round trip max error {err.item():.2e}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
