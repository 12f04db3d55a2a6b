import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = int(os.environ.get("WORKER_STEPS", "10"))
LR = 0.1


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))


def flat_params(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def load_flat(model, flat):
    offset = 0
    for p in model.parameters():
        n = p.numel()
        p.data.copy_(flat[offset:offset + n].view_as(p))
        offset += n


def serve(model, world):
    params = flat_params(model)
    grad = torch.zeros_like(params)
    n_updates = STEPS * world
    staleness = {}
    for i in range(n_updates):
        src = dist.recv(grad)
        params -= LR * grad
        staleness[src] = i
        dist.send(params, dst=src)
        if i % 10 == 0:
            print(f"[ps] update {i}/{n_updates} from worker {src}", flush=True)
    load_flat(model, params)
    torch.save(model.state_dict(), "ps_final.pt")
    print(f"[ps] finished {n_updates} updates; last seen {staleness}", flush=True)


def work(model, rank):
    loss_fn = nn.MSELoss()
    g = torch.Generator().manual_seed(rank)
    for step in range(STEPS):
        x = torch.randn(64, 8, generator=g)
        y = x[:, :1] * 2 - x[:, 1:2]
        model.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters()])
        dist.send(grad, dst=0)
        fresh = torch.empty_like(grad)
        dist.recv(fresh, src=0)
        load_flat(model, fresh)
        if step % 5 == 0:
            print(f"[worker {rank}] step {step} loss {loss.item():.4f}", flush=True)
    print(f"[worker {rank}] done", flush=True)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build_model()
    if rank == 0:
        serve(model, world)
    else:
        work(model, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
