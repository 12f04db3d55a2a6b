"""Exercise 09: DistributedSampler shards a dataset across ranks; set_epoch reshuffles it each epoch.

The dataset's items are their own indices, so what each rank's DataLoader yields is exactly
the shard it was given. Shards of one epoch are disjoint and cover the dataset. With
set_epoch(e) the shuffle is seeded by seed + e, so every epoch has a new order; without it
every epoch repeats epoch 0's order. A dataset that does not divide evenly is padded by
repeating indices, so some samples are seen twice per epoch.
"""

import argparse

import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import labkit

SAMPLES_PER_RANK = 10
BATCH_SIZE = 4


def indices_dataset(size: int) -> TensorDataset:
    return TensorDataset(torch.arange(size))


def one_epoch(loader: DataLoader) -> list[int]:
    """The dataset items this rank sees in one pass, in order."""
    return [item for (batch,) in loader for item in batch.tolist()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    ids = labkit.torchrun_env()
    rank, world = ids["rank"], ids["world_size"]
    backend, _ = labkit.init(local_rank=ids["local_rank"])
    size = SAMPLES_PER_RANK * world
    # seed must be the same on every rank: all ranks draw the same permutation and take every world-th index.
    sampler = DistributedSampler(indices_dataset(size), shuffle=True, seed=0)
    loader = DataLoader(sampler.dataset, batch_size=BATCH_SIZE, sampler=sampler)
    with_set_epoch = {}
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        with_set_epoch[str(epoch)] = one_epoch(loader)

    forgetful = DistributedSampler(indices_dataset(size), shuffle=True, seed=0)
    forgetful_loader = DataLoader(forgetful.dataset, batch_size=BATCH_SIZE, sampler=forgetful)
    without_set_epoch = {str(epoch): one_epoch(forgetful_loader) for epoch in range(args.epochs)}

    uneven_size = size + 1
    padded = DistributedSampler(indices_dataset(uneven_size), shuffle=True, seed=0)
    padded_shard = one_epoch(DataLoader(padded.dataset, batch_size=BATCH_SIZE, sampler=padded))

    labkit.log(rank, f"epoch 0: {with_set_epoch['0']}; epoch 1: {with_set_epoch['1']}; "
                     f"without set_epoch epoch 1: {without_set_epoch['1']}")
    labkit.write_result(rank, world_size=world, backend=backend, dataset_size=size, with_set_epoch=with_set_epoch,
                        without_set_epoch=without_set_epoch, uneven_dataset_size=uneven_size, padded_shard=padded_shard)
    labkit.finish()


if __name__ == "__main__":
    main()
