"""Per-class counts kept as a table (one column per metric); each column is summed across the ranks with all_reduce
on the column itself, and rank 0 checks the totals against the number of samples every rank saw."""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank, world = dist.get_rank(), dist.get_world_size()
table = torch.zeros(5, 2)  # rows: classes; columns: seen, correct
labels = torch.arange(100) % 5
table[:, 0] = torch.bincount(labels, minlength=5).float()
table[:, 1] = table[:, 0] * 0.5
for column in range(table.shape[1]):
    dist.all_reduce(table[:, column])  # the bug: a column is a strided view
seen = int(table[:, 0].sum().item())
if seen != 100 * world:
    raise SystemExit(f"rank {rank}: the table counts {seen} samples, expected {100 * world}")
dist.destroy_process_group()
