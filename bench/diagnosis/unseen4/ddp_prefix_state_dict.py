"""Train with DDP, save the weights, then build the evaluation model and load them."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
rank = dist.get_rank()


def make_model():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


torch.manual_seed(0)
model = DDP(make_model())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()

os.makedirs("out", exist_ok=True)
if rank == 0:
    torch.save(model.state_dict(), "out/final.pt")
dist.barrier()

# evaluation: a plain model, no DDP
eval_model = make_model()
eval_model.load_state_dict(torch.load("out/final.pt", map_location="cpu"))
eval_model.eval()
with torch.no_grad():
    acc = (eval_model(torch.randn(64, 16)).argmax(1) == torch.randint(0, 4, (64,))).float().mean()
print(f"rank {rank}: eval accuracy {acc:.3f}", flush=True)
dist.destroy_process_group()
