"""Validation metrics are all-reduced in a tensor stacked for the call: each rank then reports its own numbers.

`dist.all_reduce(torch.stack([loss_sum, correct]))` sums a new tensor that nobody keeps; `loss_sum` and `correct`
stay each rank's own, so the ranks disagree on the epoch's validation loss and the script's check raises.
"""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)  # each rank validates its own shard
scores = torch.randn(64, 4)
labels = torch.randint(0, 4, (64,))
loss_sum = torch.nn.functional.cross_entropy(scores, labels, reduction="sum")
correct = (scores.argmax(1) == labels).sum().float()
dist.all_reduce(torch.stack([loss_sum, correct]))  # the mistake: the sum goes into a temporary
val_loss = (loss_sum / (64 * world)).item()
seen = [None] * world
dist.all_gather_object(seen, round(val_loss, 6))
if len(set(seen)) > 1:
    raise RuntimeError(f"ranks disagree on the validation loss: {seen}")
dist.destroy_process_group()
