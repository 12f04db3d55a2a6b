"""Each rank logs its step metrics to metrics.jsonl in the run's folder (shared by the nodes), opened with "w" as
the job starts; at the end rank 0 reads the file back to report the mean loss, and finds lines cut short or missing."""
import datetime
import json
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank = dist.get_rank()
log = open("metrics.jsonl", "w")  # the bug: every rank truncates and writes the same file
for step in range(200):
    loss = torch.rand(1).item()
    log.write(json.dumps({"rank": rank, "step": step, "loss": round(loss, 6), "note": "x" * (rank * 7)}) + "\n")
    if step % 50 == 0:
        log.flush()
log.close()
dist.barrier()
if rank == 0:
    with open("metrics.jsonl") as lines:
        rows = [json.loads(line) for line in lines]
    expected = 200 * dist.get_world_size()
    if len(rows) != expected:
        raise SystemExit(f"metrics.jsonl holds {len(rows)} rows, expected {expected}")
dist.barrier()
dist.destroy_process_group()
