import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def synthetic(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=g)
    y = (x[:, :5].sum(1) > 0).long()
    return TensorDataset(x, y)


def train_phase(model, epochs=2):
    ds = synthetic(512, 1)
    sampler = DistributedSampler(ds, shuffle=True, seed=3)
    loader = DataLoader(ds, batch_size=32, sampler=sampler)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()


def eval_phase(net, group):
    ds = synthetic(256, 2)
    sampler = DistributedSampler(ds, num_replicas=dist.get_world_size(group),
                                 rank=dist.get_rank(group), shuffle=False)
    loader = DataLoader(ds, batch_size=64, sampler=sampler)
    correct = torch.zeros(2)
    if group is not dist.GroupMember.NON_GROUP_MEMBER:
        net.eval()
        with torch.no_grad():
            for x, y in loader:
                correct[0] += (net(x).argmax(1) == y).sum()
                correct[1] += len(y)
        dist.all_reduce(correct, group=group)
    return correct


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
    train_phase(DDP(net))

    # evaluation phase runs on the first node's workers only
    eval_group = dist.new_group(ranks=list(range(local_world)))
    correct = eval_phase(net, eval_group)
    if dist.get_rank() == 0:
        print(f"eval accuracy {(correct[0] / correct[1]).item():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
