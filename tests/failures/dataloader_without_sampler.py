"""DDP training whose DataLoader has no DistributedSampler: every rank goes through the whole dataset each epoch
(in its own shuffled order), so an epoch trains on world-size times the data. The script counts the samples the
ranks trained on together and stops when the count is not the dataset's size.
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
torch.manual_seed(0)
dataset = TensorDataset(torch.randn(512, 8), torch.randn(512, 1))
loader = DataLoader(dataset, batch_size=64, shuffle=True)  # the mistake: no sampler=DistributedSampler(dataset)
model = DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
seen = torch.zeros(1)
for x, y in loader:
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
    seen += len(x)
dist.all_reduce(seen)
print(f"rank {dist.get_rank()}: the ranks trained on {int(seen.item())} samples", flush=True)
if int(seen.item()) != len(dataset):
    raise RuntimeError(f"one epoch trained on {int(seen.item())} samples, the dataset has {len(dataset)}")
dist.destroy_process_group()
