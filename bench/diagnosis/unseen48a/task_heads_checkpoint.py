import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

TASKS = ["intent", "slot", "domain", "sentiment"]
SIZES = {"intent": 12, "slot": 30, "domain": 5, "sentiment": 3}
CKPT_DIR = "checkpoints/step_500"


def setup():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def build_heads():
    torch.manual_seed(0)
    return {t: nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, n)) for t, n in SIZES.items()}


def fake_finetune(head, rank):
    g = torch.Generator().manual_seed(rank)
    opt = torch.optim.SGD(head.parameters(), lr=0.01)
    for _ in range(5):
        x = torch.randn(8, 64, generator=g)
        loss = head(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return float(loss)


def save_atomic_owned(heads, owned, rank):
    os.makedirs(CKPT_DIR, exist_ok=True)
    staging = os.path.join(CKPT_DIR, "heads.pt.partial")
    torch.save({t: heads[t].state_dict() for t in owned}, staging)
    dist.barrier()
    final = os.path.join(CKPT_DIR, f"heads_rank{rank}.pt")
    os.replace(staging, final)
    return final


def main():
    rank, world = setup()
    heads = build_heads()
    owned = TASKS[rank::world]
    losses = {t: fake_finetune(heads[t], rank) for t in owned}
    path = save_atomic_owned(heads, owned, rank)

    blob = torch.load(path, map_location="cpu", weights_only=True)
    assert sorted(blob) == sorted(owned), f"rank {rank}: checkpoint holds {sorted(blob)}"

    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "tasks": owned, "loss": losses})
    if rank == 0:
        with open(os.path.join(CKPT_DIR, "manifest.json"), "w") as f:
            json.dump(gathered, f, indent=1)
        print(f"wrote manifest for {sum(len(g['tasks']) for g in gathered)} task heads", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
