"""Two-stage pipeline across two nodes (torchrun, 1 process per node): stage 0 on rank 0, stage 1 on rank 1.

Stage 1 prefetches the next micro-batch's activations with irecv and, while they are in flight, applies the optimizer
step and logs the previous micro-batch; it then polls the request until it is complete (so that the logging never
blocks on the network) and runs its half of the forward and backward.
"""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

DIM, HIDDEN, CLASSES, MICRO, STEPS = 64, 128, 10, 32, 20


def make_data(steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    xs = torch.randn(steps, MICRO, DIM, generator=g)
    ys = torch.randint(0, CLASSES, (steps, MICRO), generator=g)
    return xs, ys


def stage0(xs):
    torch.manual_seed(0)
    part = torch.nn.Sequential(torch.nn.Linear(DIM, HIDDEN), torch.nn.GELU(), torch.nn.Linear(HIDDEN, HIDDEN))
    opt = torch.optim.AdamW(part.parameters(), lr=1e-3)
    for step in range(STEPS):
        opt.zero_grad()
        h = part(xs[step])
        dist.send(h.detach().contiguous(), dst=1)
        grad = torch.empty_like(h)
        dist.recv(grad, src=1)
        h.backward(grad)
        opt.step()
    print("stage 0 done", flush=True)


def wait_polling(req, poll_s=0.001):
    """Spin on the request instead of blocking in wait(), so the caller can keep its own timing."""
    while not req.is_completed():
        time.sleep(poll_s)


def stage1(ys):
    torch.manual_seed(1)
    part = torch.nn.Sequential(torch.nn.GELU(), torch.nn.Linear(HIDDEN, CLASSES))
    opt = torch.optim.AdamW(part.parameters(), lr=1e-3)
    last_loss = None
    for step in range(STEPS):
        buf = torch.empty(MICRO, HIDDEN)
        req = dist.irecv(buf, src=0)          # prefetch this micro-batch's activations
        if last_loss is not None:             # overlap: finish the previous step while they travel
            opt.step()
            print(f"step {step - 1} loss {last_loss:.4f}", flush=True)
        opt.zero_grad()
        wait_polling(req)
        h = buf.requires_grad_()
        loss = torch.nn.functional.cross_entropy(part(h), ys[step])
        loss.backward()
        dist.send(h.grad.contiguous(), dst=0)
        last_loss = loss.item()
    opt.step()
    print(f"stage 1 done, final loss {last_loss:.4f}", flush=True)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "300"))))
    rank = dist.get_rank()
    assert dist.get_world_size() == 2, "one process on each of two nodes"
    xs, ys = make_data(STEPS)
    if rank == 0:
        stage0(xs)
    else:
        stage1(ys)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
