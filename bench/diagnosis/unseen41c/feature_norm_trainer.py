import datetime
import functools
import os

import torch
import torch.distributed as dist
import torch.nn as nn


# ---- dist_utils -----------------------------------------------------------
def get_rank():
    return dist.get_rank() if dist.is_initialized() else 0


def get_world_size():
    return dist.get_world_size() if dist.is_initialized() else 1


def is_main_process():
    return get_rank() == 0


def rank_zero_only(fn):
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        if is_main_process():
            return fn(*args, **kwargs)
    return wrapped


@rank_zero_only
def log(msg):
    print(f"[train] {msg}", flush=True)


def barrier():
    if get_world_size() > 1:
        dist.barrier()


def broadcast_tensor(t, src=0):
    if get_world_size() > 1:
        dist.broadcast(t, src=src)
    return t


def all_reduce_mean(t):
    if get_world_size() > 1:
        dist.all_reduce(t)
        t /= get_world_size()
    return t
# ---------------------------------------------------------------------------


def make_data(n=512, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g) * 3.0 + 1.5
    w = torch.randn(d, 1, generator=g)
    y = x @ w + 0.1 * torch.randn(n, 1, generator=g)
    return x, y


@rank_zero_only
def compute_feature_stats(x):
    mean = x.mean(dim=0)
    std = x.std(dim=0).clamp_min(1e-6)
    log(f"feature stats computed over {x.shape[0]} rows")
    return torch.stack([mean, std])


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = get_rank(), get_world_size()
    torch.manual_seed(0)

    x, y = make_data()
    stats = compute_feature_stats(x)
    stats = broadcast_tensor(stats, src=0)
    x = (x - stats[0]) / stats[1]

    shard = slice(rank, None, world)
    xs, ys = x[shard], y[shard]

    model = nn.Linear(x.shape[1], 1)
    for p in model.parameters():
        broadcast_tensor(p.data)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    for step in range(30):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(xs), ys)
        loss.backward()
        for p in model.parameters():
            all_reduce_mean(p.grad)
        opt.step()
        if step % 10 == 0:
            log(f"step {step} loss {all_reduce_mean(loss.detach().clone()).item():.4f}")

    barrier()
    log("done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
