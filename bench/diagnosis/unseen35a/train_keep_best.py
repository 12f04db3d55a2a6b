import os
import glob
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

CKPT_DIR = "checkpoints"
KEEP_BEST = 2
EPOCHS = 6


def make_data(rank, world):
    g = torch.Generator().manual_seed(1234)
    w_true = torch.randn(16, 1, generator=g)
    x = torch.randn(4096, 16, generator=g)
    y = x @ w_true + 0.3 * torch.randn(4096, 1, generator=g)
    xv = torch.randn(512, 16, generator=g)
    drift = torch.where(torch.arange(512) < 256, 1.0, -1.0).unsqueeze(1)
    yv = drift * (xv @ w_true)
    tr = slice(rank, None, world)
    per = 512 // world
    va = slice(rank * per, (rank + 1) * per)
    return x[tr], y[tr], xv[va], yv[va]


def save_shard(model, opt, epoch, rank):
    path = os.path.join(CKPT_DIR, f"epoch{epoch:03d}-rank{rank}.pt")
    torch.save({"epoch": epoch, "model": model.module.state_dict(), "opt": opt.state_dict()}, path)
    return path


def prune(history, rank):
    ranked = sorted(history, key=lambda kv: kv[1])
    keep = {e for e, _ in ranked[:KEEP_BEST]}
    for path in glob.glob(os.path.join(CKPT_DIR, f"epoch*-rank{rank}.pt")):
        epoch = int(os.path.basename(path)[5:8])
        if epoch not in keep:
            os.remove(path)
    return ranked[0][0]


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    os.makedirs(CKPT_DIR, exist_ok=True)
    torch.manual_seed(0)

    x, y, xv, yv = make_data(rank, world)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    loss_fn = nn.MSELoss()
    history = []
    best_epoch = None

    for epoch in range(EPOCHS):
        model.train()
        for i in range(0, x.shape[0], 64):
            opt.zero_grad()
            loss = loss_fn(model(x[i:i + 64]), y[i:i + 64])
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            val = loss_fn(model(xv), yv).item()
        save_shard(model, opt, epoch, rank)
        history.append((epoch, val))
        best_epoch = prune(history, rank)
        print(f"[rank {rank}] epoch {epoch} val {val:.4f} best {best_epoch}", flush=True)

    obj = [best_epoch]
    dist.broadcast_object_list(obj, src=0)
    chosen = obj[0]
    state = torch.load(os.path.join(CKPT_DIR, f"epoch{chosen:03d}-rank{rank}.pt"), map_location="cpu")
    model.module.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])

    model.eval()
    with torch.no_grad():
        val = torch.tensor([loss_fn(model(xv), yv).item()])
    dist.all_reduce(val)
    if rank == 0:
        print(f"restored epoch {chosen}: mean val loss {val.item() / world:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
