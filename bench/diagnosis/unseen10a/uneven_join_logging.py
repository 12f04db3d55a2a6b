"""DDP over shards of different lengths, using the Join context manager, with a running loss logged per step."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # the shards come from files of different sizes: 40 batches on rank 0, 32 on the others
    batches = 40 if rank == 0 else 32
    g = torch.Generator().manual_seed(rank)
    with Join([model]):
        for step in range(batches):
            x, y = torch.randn(16, 32, generator=g), torch.randn(16, 1, generator=g)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            running = loss.detach().clone()
            dist.all_reduce(running)
            if rank == 0 and step % 8 == 0:
                print(f"step {step}: mean loss {running.item() / world:.4f}", flush=True)
    print(f"rank {rank}: finished {batches} batches", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
