"""DDP fine-tuning with a slow-step watchdog: when a step runs longer than STALL_AFTER_S, the watchdog asks the
process to dump every thread's stack into the run log (faulthandler), a poor man's sampling profiler that also
shows where a hang sits."""
import datetime
import faulthandler
import os
import signal
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STALL_AFTER_S = 1.0
STEPS = 30


class StallWatchdog(threading.Thread):
    def __init__(self, stall_after):
        super().__init__(daemon=True)
        self.stall_after, self.last_beat, self.reported = stall_after, time.monotonic(), False

    def beat(self):
        self.last_beat, self.reported = time.monotonic(), False

    def run(self):
        while True:
            time.sleep(0.25)
            if not self.reported and time.monotonic() - self.last_beat > self.stall_after:
                self.reported = True
                os.kill(os.getpid(), signal.SIGUSR1)


def setup_run_log(rank):
    if rank != 0:
        return None
    log = open("finetune_run.log", "a", buffering=1)
    faulthandler.register(signal.SIGUSR1, file=log, all_threads=True)
    log.write(f"run started {time.ctime()}\n")
    return log


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 8))


def baseline_eval(model, n_batches=1000):
    g = torch.Generator().manual_seed(11)
    total = 0.0
    with torch.no_grad():
        for _ in range(n_batches):
            x = torch.randn(512, 128, generator=g)
            total += model(x).logsumexp(dim=1).mean().item()
    return total / n_batches


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    log = setup_run_log(rank)
    watchdog = StallWatchdog(STALL_AFTER_S)
    watchdog.start()

    model = DDP(make_model())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    for step in range(STEPS):
        watchdog.beat()
        if step == 0 and rank == 0:
            t0 = time.time()
            base = baseline_eval(model.module)
            log.write(f"baseline score {base:.4f} ({time.time() - t0:.1f}s)\n")
        x = torch.randn(64, 128, generator=g)
        y = torch.randint(0, 8, (64,), generator=g)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 10 == 0:
            log.write(f"step {step} loss {loss.item():.4f}\n")
    dist.barrier()
    if rank == 0:
        log.write("finished\n")
        log.close()
        print("fine-tuning finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
