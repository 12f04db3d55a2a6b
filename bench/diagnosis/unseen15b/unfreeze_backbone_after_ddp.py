"""Two-stage fine-tuning (linear probe, then full fine-tune) of a small CNN on 2 nodes with DDP.

Stage 1 trains only the classifier with the backbone frozen; stage 2 unfreezes the backbone at a 10x smaller
learning rate (gradual unfreezing, as in ULMFiT / BackboneFinetuning). Before the final checkpoint the job checks
that every rank holds the same weights, as a DDP job must.
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_model():
    backbone = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )
    return nn.Sequential(backbone, nn.Linear(32, 5))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()

    gen = torch.Generator().manual_seed(7)
    images = torch.randn(384, 3, 16, 16, generator=gen)
    labels = (images[:, 0].mean(dim=(1, 2)) > 0).long() + 2 * (images[:, 1].mean(dim=(1, 2)) > 0).long()
    data = TensorDataset(images, labels)
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=32, sampler=sampler)

    torch.manual_seed(0)
    model = make_model()
    backbone, classifier = model[0], model[1]
    for p in backbone.parameters():           # stage 1: linear probe
        p.requires_grad_(False)
    ddp = DDP(model)
    opt = torch.optim.SGD(classifier.parameters(), lr=0.05, momentum=0.9)

    for epoch in range(4):
        if epoch == 2:                        # stage 2: unfreeze the backbone at a smaller lr
            for p in backbone.parameters():
                p.requires_grad_(True)
            opt.add_param_group({"params": list(backbone.parameters()), "lr": 0.005})
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = F.cross_entropy(ddp(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)

    # every rank must hold the same weights before rank 0 writes the checkpoint
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    gap = (flat - reference).abs().max()
    dist.all_reduce(gap, op=dist.ReduceOp.MAX)
    if gap > 1e-6:
        raise RuntimeError(f"model replicas differ across ranks after training (max |w - w_rank0| = {gap:.3e}); "
                           "refusing to save a checkpoint")
    if rank == 0:
        torch.save(model.state_dict(), "finetuned.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
