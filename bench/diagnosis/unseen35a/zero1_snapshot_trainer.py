import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist

SNAP_DIR = "snapshots"
SNAP_EVERY = 20
STEPS = 60


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))


def owned_params(model, rank, world):
    return [p for i, p in enumerate(model.parameters()) if i % world == rank]


def build_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)


def sync_step(model, opt, rank, world):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad.div_(world)
    opt.step()
    for i, p in enumerate(model.parameters()):
        dist.broadcast(p.data, src=i % world)


def save_snapshot(model, opt, step, rank):
    path = os.path.join(SNAP_DIR, f"step{step}-rank{rank}.pt")
    torch.save({"step": step, "model": model.state_dict(), "optim": opt.state_dict()}, path + ".tmp")
    os.replace(path + ".tmp", path)
    return path


def verify_snapshot(path):
    state = torch.load(path, map_location="cpu")
    model = build_model()
    model.load_state_dict(state["model"])
    opt = build_optimizer(model.parameters())
    opt.load_state_dict(state["optim"])
    return state["step"]


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    os.makedirs(SNAP_DIR, exist_ok=True)

    model = build_model()
    opt = build_optimizer(owned_params(model, rank, world))
    g = torch.Generator().manual_seed(100 + rank)
    loss_fn = nn.CrossEntropyLoss()

    for step in range(1, STEPS + 1):
        x = torch.randn(32, 32, generator=g)
        y = torch.randint(0, 4, (32,), generator=g)
        model.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        sync_step(model, opt, rank, world)
        if step % SNAP_EVERY == 0:
            path = save_snapshot(model, opt, step, rank)
            dist.barrier()
            ok_step = verify_snapshot(path)
            if rank == 0:
                print(f"step {step} loss {loss.item():.4f} snapshot ok at {ok_step}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
