"""The validation loss is averaged across ranks with an all_reduce, but the all_reduce adds (its op is SUM by
default) and the result is logged as the mean: with 2 ranks it is twice the real loss, and the early-stopping
guard, which knows the loss of an untrained model, stops the run as diverged.
"""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
torch.manual_seed(0)
model = torch.nn.Linear(16, 4)
inputs, labels = torch.randn(256, 16), torch.randint(0, 4, (256,))
shard = slice(dist.get_rank() * 128, (dist.get_rank() + 1) * 128)
with torch.no_grad():
    local = torch.nn.functional.cross_entropy(model(inputs[shard]), labels[shard])
    everywhere = torch.nn.functional.cross_entropy(model(inputs), labels)
val_loss = local.clone()
dist.all_reduce(val_loss)  # the mistake: the sum of the ranks' losses, used below as their mean
print(f"rank {dist.get_rank()}: val loss {val_loss.item():.4f}", flush=True)
if val_loss.item() > 1.5 * everywhere.item():
    raise RuntimeError(f"validation loss {val_loss.item():.4f} against {everywhere.item():.4f} for the whole set: "
                       "training diverged, stopping")
dist.destroy_process_group()
