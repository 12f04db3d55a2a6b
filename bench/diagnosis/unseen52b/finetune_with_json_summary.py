import os
import json
import time
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def is_dist():
    return dist.is_initialized() and dist.get_world_size() > 1


def mean_over_ranks(value):
    if not is_dist():
        return value.item() if torch.is_tensor(value) else float(value)
    t = torch.as_tensor(value, dtype=torch.float32).detach().clone()
    dist.all_reduce(t)
    return t / dist.get_world_size()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(12, 24), nn.GELU(), nn.Linear(24, 3)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(11 + rank)
    history = []
    start = time.time()
    total_loss, steps = 0.0, 0
    for step in range(1, 31):
        x = torch.randn(32, 12, generator=g)
        y = (x[:, 0] > 0).long() + (x[:, 1] > 1).long()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total_loss += loss.item()
        steps += 1
        if step % 10 == 0:
            history.append({"step": step, "loss": mean_over_ranks(loss.detach())})
    runtime = time.time() - start
    summary = {
        "train_loss": mean_over_ranks(total_loss / steps),
        "train_runtime": round(runtime, 3),
        "train_steps": steps,
        "world_size": dist.get_world_size(),
        "log_history": history,
    }
    if rank == 0:
        os.makedirs("output", exist_ok=True)
        with open(os.path.join("output", "trainer_state.json"), "w") as f:
            json.dump(summary, f, indent=2)
        print("wrote output/trainer_state.json", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
