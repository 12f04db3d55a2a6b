import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset, DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP

EPOCHS = 4
BATCH = 32
CKPT = "last.pt"


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(7)
    x = torch.randn(960, 20, generator=g)
    y = (x[:, 0] > 0).long()
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=1)
    loader = DataLoader(ds, batch_size=BATCH, sampler=sampler)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    steps_per_epoch = len(ds) // (BATCH * world)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, epochs=EPOCHS, steps_per_epoch=steps_per_epoch)
    start_epoch = 0
    if os.path.exists(CKPT):
        state = torch.load(CKPT, map_location="cpu")
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        sched.load_state_dict(state["sched"])
        start_epoch = state["epoch"] + 1

    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(start_epoch, EPOCHS):
        sampler.set_epoch(epoch)
        total = torch.zeros(2)
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            total += torch.tensor([loss.item() * len(yb), len(yb)])
        dist.all_reduce(total)
        if rank == 0:
            torch.save({"epoch": epoch, "model": model.module.state_dict(), "optim": opt.state_dict(),
                        "sched": sched.state_dict()}, CKPT + ".tmp")
            os.replace(CKPT + ".tmp", CKPT)
            print(f"epoch {epoch} loss {total[0].item() / total[1].item():.4f} lr {sched.get_last_lr()[0]:.2e}",
                  flush=True)
        dist.barrier()

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
