import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn


class ShardedMLP(nn.Module):
    """Each rank owns a slice of the hidden layer (column split, then row split)."""

    def __init__(self, d_model, d_hidden, world):
        super().__init__()
        self.up = nn.Linear(d_model, d_hidden // world)
        self.down = nn.Linear(d_hidden // world, d_model, bias=False)

    def forward(self, x):
        partial = self.down(torch.relu(self.up(x)))
        dist.all_reduce(partial)
        return partial


def train(model, opt, steps, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g)
        loss = (model(x) - x.flip(-1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def save_shard(folder, step, model, opt):
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    os.makedirs(folder, exist_ok=True)
    state = {"step": step, "model": model.state_dict(), "optim": opt.state_dict(),
             "world_size": dist.get_world_size()}
    torch.save(state, os.path.join(folder, f"shard_{local_rank:02d}.pt"))


def load_shard(folder, model, opt):
    rank = dist.get_rank()
    state = torch.load(os.path.join(folder, f"shard_{rank:02d}.pt"), weights_only=True)
    if state["world_size"] != dist.get_world_size():
        raise RuntimeError(f"checkpoint written by {state['world_size']} ranks, running on {dist.get_world_size()}")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
    return state["step"]


def main():
    p = argparse.ArgumentParser(description="save a sharded checkpoint, restore it in fresh objects, compare")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--folder", default="ckpt_roundtrip")
    args = p.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(100 + rank)
    model = ShardedMLP(16, 64, world)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    train(model, opt, args.steps, seed=1)
    save_shard(args.folder, args.steps, model, opt)
    dist.barrier()
    ref = train(model, opt, 5, seed=2)

    torch.manual_seed(999)
    fresh = ShardedMLP(16, 64, world)
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=1e-2)
    step = load_shard(args.folder, fresh, fresh_opt)
    got = train(fresh, fresh_opt, 5, seed=2)

    diff = torch.tensor([abs(ref - got)])
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    if rank == 0:
        status = "OK" if diff.item() < 1e-5 else "MISMATCH"
        print(f"resume from step {step}: loss {ref:.6f} vs {got:.6f} -> {status}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
