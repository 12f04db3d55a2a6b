import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

HEALTH_EVERY = 5
MAX_LAG_S = 1.0


class HealthMonitor:
    def __init__(self, rank, world):
        self.rank, self.world = rank, world

    def check(self, step, loss):
        beat = torch.tensor([self.rank, step, loss.item(), time.time()])
        beats = [torch.zeros_like(beat) for _ in range(self.world)]
        dist.all_gather(beats, beat)
        now = time.time()
        for b in beats:
            r, r_step, r_loss, r_wall = int(b[0]), int(b[1]), float(b[2]), float(b[3])
            if not math.isfinite(r_loss):
                raise RuntimeError(f"rank {r} reported loss {r_loss} at step {r_step}")
            if r_step != step:
                raise RuntimeError(f"rank {r} is at step {r_step}, expected {step}")
            if abs(now - r_wall) > MAX_LAG_S:
                raise RuntimeError(f"rank {r} heartbeat is {now - r_wall:+.1f}s off (limit {MAX_LAG_S}s)")
        if self.rank == 0:
            mean = sum(float(b[2]) for b in beats) / len(beats)
            print(f"health ok at step {step}: mean loss {mean:.4f}", flush=True)


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    monitor = HealthMonitor(rank, world)
    g = torch.Generator().manual_seed(rank)
    for step in range(1, 31):
        x = torch.randn(32, 16, generator=g)
        y = torch.randint(0, 4, (32,), generator=g)
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % HEALTH_EVERY == 0:
            monitor.check(step, loss)
    dist.barrier()
    if rank == 0:
        print("training finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
