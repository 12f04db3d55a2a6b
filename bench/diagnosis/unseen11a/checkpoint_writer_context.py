"""Rank 0 writes checkpoints in a background process so training never waits for the disk."""
import multiprocessing as mp
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def writer(jobs):
    while True:
        item = jobs.get()
        if item is None:
            return
        state, path = item
        torch.save(state, path)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    model = torch.nn.Linear(8, 1)
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    if rank == 0:
        jobs = mp.Queue()
        # spawn, not fork: a forked child would inherit the process group's threads and sockets
        proc = mp.get_context("spawn").Process(target=writer, args=(jobs,), daemon=True)
        proc.start()
    for step in range(30):
        loss = model(torch.randn(32, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
        opt.step()
        if rank == 0 and step % 10 == 9:
            jobs.put(({k: v.clone() for k, v in model.state_dict().items()}, f"ckpt-{step}.pt"))
    if rank == 0:
        jobs.put(None)
        proc.join()
    print(f"rank {rank}: done, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
