"""Exercise 03: DDP training launched by torchrun on every node.

torchrun gives each worker RANK, LOCAL_RANK, WORLD_SIZE and GROUP_RANK (the node's place in
the rendezvous, which c10d chooses: it need not equal NODE_RANK). A DistributedSampler gives
each rank its own slice of a deterministic synthetic regression set; DDP averages gradients,
so every replica ends with the same parameters.
"""

import argparse
import math

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import labkit

DATASET_SIZE = 1024
FEATURES = 8


def synthetic_dataset() -> TensorDataset:
    """The same data on every rank, with no files: y = sin(x . w) + x . v, from a fixed seed."""
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(DATASET_SIZE, FEATURES, generator=generator)
    w = torch.randn(FEATURES, generator=generator) / FEATURES**0.5
    v = torch.randn(FEATURES, generator=generator) / 4
    targets = torch.sin(inputs @ w) + inputs @ v
    return TensorDataset(inputs, targets.unsqueeze(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.03)
    args = parser.parse_args()

    ids = labkit.torchrun_env()
    rank = ids.pop("rank")
    backend, device = labkit.init(local_rank=ids["local_rank"])
    # A different seed per rank: identical replicas at the end are DDP's doing (it broadcasts rank 0's weights).
    torch.manual_seed(1000 + rank)
    model = labkit.wrap_ddp(torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.Tanh(),
                                                torch.nn.Linear(32, 1)), device)
    sampler = DistributedSampler(synthetic_dataset(), shuffle=True, seed=0)
    loader = DataLoader(sampler.dataset, batch_size=args.batch_size, sampler=sampler)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    labkit.log(rank, f"group rank {ids['group_rank']}, local rank {ids['local_rank']}, "
                     f"{len(sampler)} of {DATASET_SIZE} samples, backend {backend}")

    first_loss = epoch_loss = math.nan
    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        losses = []
        for inputs, targets in loader:
            loss = torch.nn.functional.mse_loss(model(inputs.to(device)), targets.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            labkit.append_metric(rank, step=step, epoch=epoch, loss=loss.item())
            step += 1
        if epoch == 0:
            first_loss = labkit.global_mean(losses[0], device)
        epoch_loss = labkit.global_mean(sum(losses) / len(losses), device)
        if rank == 0:
            labkit.log(rank, f"epoch {epoch}: mean loss {epoch_loss:.4f}")

    labkit.write_result(rank, **ids, pg_world_size=dist.get_world_size(), backend=backend,
                        dataset_size=DATASET_SIZE, samples=len(sampler), steps=step,
                        first_loss=first_loss, final_loss=epoch_loss, params_hash=labkit.parameters_hash(model))
    labkit.finish()


if __name__ == "__main__":
    main()
