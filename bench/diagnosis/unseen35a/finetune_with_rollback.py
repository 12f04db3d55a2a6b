import os
import math
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

SNAPSHOT = "rollback_snapshot.pt"
EPOCHS = 8
STEPS_PER_EPOCH = 25


def batches(epoch, rank):
    g = torch.Generator().manual_seed(1000 * epoch + rank)
    for step in range(STEPS_PER_EPOCH):
        x = torch.randn(16, 24, generator=g)
        y = x[:, :3].sum(dim=1, keepdim=True)
        if epoch == 5 and step == 10:
            y = y * 1e4
        yield x, y


def make_scheduler(opt, last_epoch=-1):
    return torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5, last_epoch=last_epoch)


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(24, 48), nn.GELU(), nn.Linear(48, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    sched = make_scheduler(opt)
    loss_fn = nn.MSELoss()
    running = None
    epoch = 0

    while epoch < EPOCHS:
        rolled_back = False
        for x, y in batches(epoch, rank):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            val = loss.detach().clone()
            dist.all_reduce(val)
            val = val.item() / world
            if running is not None and (not math.isfinite(val) or val > 20 * running):
                rolled_back = True
                break
            running = val if running is None else 0.9 * running + 0.1 * val
        if rolled_back:
            if rank == 0:
                print(f"loss spike in epoch {epoch}: rolling back", flush=True)
                state = torch.load(SNAPSHOT, map_location="cpu")
                model.module.load_state_dict(state["model"])
                opt.load_state_dict(state["optim"])
                sched.load_state_dict(state["sched"])
                resume = torch.tensor([state["epoch"]])
            else:
                resume = torch.tensor([0])
            for p in model.module.parameters():
                dist.broadcast(p.data, src=0)
            dist.broadcast(resume, src=0)
            epoch = int(resume.item())
            if rank != 0:
                opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
                sched = make_scheduler(opt, last_epoch=epoch - 1)
            continue
        sched.step()
        epoch += 1
        if rank == 0:
            torch.save({"epoch": epoch, "model": model.module.state_dict(), "optim": opt.state_dict(),
                        "sched": sched.state_dict()}, SNAPSHOT)
            print(f"epoch {epoch} loss {running:.4f} lr {sched.get_last_lr()[0]:.4g}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
