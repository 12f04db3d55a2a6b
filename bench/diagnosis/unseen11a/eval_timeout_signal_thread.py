"""Run validation in a background thread while rank 0 keeps training; bound validation time with an alarm."""
import os
import signal
import threading
from datetime import timedelta

import torch
import torch.distributed as dist


class ValidationTimeout(Exception):
    pass


def validate(model, result):
    def on_alarm(signum, frame):
        raise ValidationTimeout("validation took longer than 30 s")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(30)
    try:
        with torch.no_grad():
            x = torch.randn(256, 8)
            result["val_loss"] = model(x).pow(2).mean().item()
    finally:
        signal.alarm(0)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    model = torch.nn.Linear(8, 1)
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        loss = model(torch.randn(64, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
        opt.step()
        val = torch.zeros(1)
        if rank == 0:
            result = {}
            worker = threading.Thread(target=validate, args=(model, result), name="validation")
            worker.start()
            worker.join()
            val[0] = result["val_loss"]
        dist.broadcast(val, 0)
        print(f"rank {rank} epoch {epoch}: val loss {val.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
