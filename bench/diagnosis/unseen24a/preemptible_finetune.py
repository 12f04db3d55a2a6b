import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

EPOCHS = 3
STEPS_PER_EPOCH = 12
CKPT = os.environ.get("CKPT_PATH", "finetune_last.pt")


def make_components():
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(24, 48), nn.Tanh(), nn.Linear(48, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=0.1, total_steps=EPOCHS * STEPS_PER_EPOCH, pct_start=0.25
    )
    return model, opt, sched


def run_steps(model, opt, sched, start, stop, rank):
    g = torch.Generator().manual_seed(rank * 10_000 + start)
    for step in range(start, stop):
        x = torch.randn(32, 24, generator=g)
        y = (x[:, :4] > 0).long().argmax(dim=1)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return loss.item()


def save(model, opt, sched, local_steps):
    done = torch.tensor([local_steps], dtype=torch.long)
    dist.all_reduce(done)
    if dist.get_rank() == 0:
        torch.save({"global_step": int(done.item()), "model": model.module.state_dict(),
                    "optim": opt.state_dict(), "sched": sched.state_dict()}, CKPT)
    dist.barrier()


def restore():
    model, opt, sched = make_components()
    state = torch.load(CKPT, weights_only=True)
    model.module.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
    sched.load_state_dict(state["sched"])
    sched.last_epoch = state["global_step"]
    return model, opt, sched, state["global_step"]


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    preempt_at = int(os.environ.get("PREEMPT_AT_EPOCH", "1"))
    model, opt, sched = make_components()
    step = 0
    for epoch in range(EPOCHS):
        loss = run_steps(model, opt, sched, step, step + STEPS_PER_EPOCH, rank)
        step += STEPS_PER_EPOCH
        save(model, opt, sched, step)
        if rank == 0:
            print(f"epoch {epoch} loss {loss:.4f} lr {sched.get_last_lr()[0]:.5f}", flush=True)
        if epoch + 1 == preempt_at:
            # rehearse a preemption: drop everything and come back from the checkpoint
            del model, opt, sched
            model, opt, sched, step = restore()
            if rank == 0:
                print(f"restored at step {step}", flush=True)
    if rank == 0:
        print("finetune done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
