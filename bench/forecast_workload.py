"""A DDP job whose gradients span several buckets, for `lab bench --only forecast` (and a user's model in miniature).

An MLP of --layers Linear(--width, --width) layers trained with SGD on random data; DDP's bucket_cap_mb decides how
many all_reduces a step makes (default 1 MiB: 8 x 512 x 512 floats = 8.4 MB of gradients in about 8 buckets). Each
rank prints nothing per step: the lab's profile of the run (`lab torchrun --profile`) is what the forecast reads.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--width", type=int, default=512)
parser.add_argument("--layers", type=int, default=8)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--bucket-mb", type=float, default=1.0)
args = parser.parse_args()

dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=int(os.environ.get("LAB_PG_TIMEOUT", 120))))
torch.manual_seed(0)
layers = []
for _ in range(args.layers):
    layers += [torch.nn.Linear(args.width, args.width), torch.nn.Tanh()]
model = DistributedDataParallel(torch.nn.Sequential(*layers), bucket_cap_mb=args.bucket_mb)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
generator = torch.Generator().manual_seed(dist.get_rank())
started = time.monotonic()
for step in range(args.steps):
    inputs = torch.randn(args.batch, args.width, generator=generator)
    loss = (model(inputs) - torch.sin(inputs)).pow(2).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
if dist.get_rank() == 0:
    print(f"{args.steps} steps in {time.monotonic() - started:.2f} s, loss {loss.item():.4f}", flush=True)
dist.barrier()
dist.destroy_process_group()
