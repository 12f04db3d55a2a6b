"""Each rank runs a held-out evaluation in a helper process (a separate script, as in many repos)."""
import datetime
import os
import subprocess
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
rank = dist.get_rank()

EVAL = """
import datetime, os, torch, torch.distributed as dist
# the helper sums its metrics over the evaluation workers
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
acc = torch.tensor([0.8])
dist.all_reduce(acc)
print("eval accuracy", acc.item() / dist.get_world_size())
"""

w = torch.zeros(4)
for step in range(3):
    g = torch.ones(4)
    dist.all_reduce(g)
    w -= 0.1 * g
torch.save(w, f"weights_rank{rank}.pt")
out = subprocess.run([sys.executable, "-c", EVAL], capture_output=True, text=True, timeout=60)
print(out.stdout, out.stderr[-2000:], flush=True)
out.check_returncode()
dist.barrier()
dist.destroy_process_group()
