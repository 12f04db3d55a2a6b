import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 4))


def calibration_batches(rank, n=8):
    g = torch.Generator().manual_seed(1000 + rank)
    for _ in range(n):
        yield torch.randn(64, 32, generator=g) * (1.0 + rank)


@torch.no_grad()
def channel_importance(model, rank):
    acts = torch.zeros(model[0].out_features)
    for x in calibration_batches(rank):
        acts += F.relu(model[0](x)).mean(0)
    return acts


@torch.no_grad()
def prune_hidden(model, importance, threshold=0.5):
    keep = (importance / importance.max() > threshold).nonzero().flatten()
    fc1, fc2 = model[0], model[2]
    new1 = nn.Linear(fc1.in_features, keep.numel())
    new1.weight.copy_(fc1.weight[keep])
    new1.bias.copy_(fc1.bias[keep])
    new2 = nn.Linear(keep.numel(), fc2.out_features)
    new2.weight.copy_(fc2.weight[:, keep])
    new2.bias.copy_(fc2.bias)
    return nn.Sequential(new1, nn.ReLU(), new2), keep.numel()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()

    model = make_model()
    importance = channel_importance(model, rank)
    model, kept = prune_hidden(model, importance)
    print(f"rank {rank}: kept {kept}/128 hidden channels", flush=True)

    model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(rank)
    for step in range(30):
        x = torch.randn(64, 32, generator=g)
        y = (x[:, :4].sum(1) > 0).long() + (x[:, 4] > 1).long()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), "pruned_finetuned.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
