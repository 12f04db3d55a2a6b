"""Join the process group with the rank and world size the launcher exports, then train a few steps."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def setup():
    rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    return rank, world_size


def main():
    rank, world_size = setup()
    model = torch.nn.Linear(8, 1)
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):
        loss = model(torch.randn(32, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world_size
        opt.step()
    print(f"rank {rank}/{world_size}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
