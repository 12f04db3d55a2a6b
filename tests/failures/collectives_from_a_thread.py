"""Training all_reduces its gradients in the main thread while a reporter thread all_reduces a running metric on the
same (default) group: which call reaches the group first differs per rank."""
import datetime
import os
import threading
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank = dist.get_rank()
seen = torch.zeros(1)


def report():
    for _ in range(20):
        time.sleep(0.013 * (rank + 1))
        total = seen.clone()
        dist.all_reduce(total)  # the bug: a second thread's collective on the group the main thread uses


threading.Thread(target=report, name="reporter", daemon=True).start()
for step in range(200):
    grads = torch.ones(256 + 64 * (step % 3))
    dist.all_reduce(grads)
    seen += 1
    time.sleep(0.005)
print(f"rank {rank}: done {int(seen.item())} steps")
dist.destroy_process_group()
