"""Exercise 08: data-parallel gradient averaging three ways, and the bug of skipping the initial broadcast.

Each rank trains a copy of one small model on its own batch. Averaging gradients (all_reduce,
then divide by the world size) before each optimizer step keeps the copies identical, done
  - by hand after backward(),
  - in a hook that fires as each parameter's gradient is ready (register_post_accumulate_grad_hook),
  - by DistributedDataParallel.
All three must end with the same parameters. The model is initialised without a seed, so every
rank starts from different weights: the first two broadcast rank 0's weights, DDP does so when it
is built. A fourth copy averages by hand but skips the broadcast; it never becomes identical.

The three ways are compared bit for bit (by hash), so every one of them sums in float64: all_reduce
adds the ranks' float32 values in an order that depends on the buffer's layout (DDP packs gradients
into buckets), and with more than two ranks a different order can change the last bit.
"""

import copy

import torch
import torch.distributed as dist

import labkit

FEATURES = 8
BATCH = 16
STEPS = 5
LR = 0.1


def make_model() -> torch.nn.Module:
    # No manual_seed: every process draws its own initial weights.
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def local_batch(rank: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Each rank's own data: seeded by rank, so it differs between ranks but not between runs."""
    generator = torch.Generator().manual_seed(100 + rank)
    inputs = torch.randn(BATCH, FEATURES, generator=generator)
    return inputs.to(device), inputs.sum(dim=1, keepdim=True).sin().to(device)


def average_(gradient: torch.Tensor) -> None:
    """gradient <- mean over ranks, summed in float64 so that the order of addition cannot matter."""
    total = gradient.double()
    dist.all_reduce(total)
    gradient.copy_(total / dist.get_world_size())


def ddp_average_hook(_state, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP's own averaging, done by average_ like the other two ways (DDP's default sums in float32)."""
    average_(bucket.buffer())
    done = torch.futures.Future()
    done.set_result(bucket.buffer())
    return done


def average_by_hand(model: torch.nn.Module) -> None:
    for parameter in model.parameters():
        average_(parameter.grad)


def broadcast_from_rank0(model: torch.nn.Module) -> torch.nn.Module:
    for tensor in model.state_dict().values():
        dist.broadcast(tensor, src=0)
    return model


def with_averaging_hooks(model: torch.nn.Module) -> torch.nn.Module:
    for parameter in model.parameters():
        parameter.register_post_accumulate_grad_hook(lambda param: average_(param.grad))
    return model


def with_ddp(model: torch.nn.Module, device) -> torch.nn.Module:
    """DDP broadcasts rank 0's weights when it is built, and averages gradients during backward."""
    ddp = labkit.wrap_ddp(model, device)
    ddp.register_comm_hook(None, ddp_average_hook)
    return ddp


def train(model: torch.nn.Module, batch, after_backward=None) -> torch.nn.Module:
    """Plain SGD; `after_backward` is where hand-rolled averaging happens."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    inputs, targets = batch
    for _ in range(STEPS):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(inputs), targets).backward()
        if after_backward:
            after_backward(model)
        optimizer.step()
    return model


def main() -> None:
    ids = labkit.torchrun_env()
    rank = ids["rank"]
    backend, device = labkit.init(local_rank=ids["local_rank"])
    initial = make_model().to(device)
    batch = local_batch(rank, device)

    def replica() -> torch.nn.Module:
        return copy.deepcopy(initial)

    trained = {
        "by_hand": train(broadcast_from_rank0(replica()), batch, average_by_hand),
        "by_hook": train(with_averaging_hooks(broadcast_from_rank0(replica())), batch),
        "by_ddp": train(with_ddp(replica(), device), batch).module,
        "no_broadcast": train(replica(), batch, average_by_hand),
    }
    hashes = {f"{name}_hash": labkit.parameters_hash(model) for name, model in trained.items()}
    for name, digest in hashes.items():
        labkit.log(rank, f"{name:>17}: {digest[:16]}")
    labkit.write_result(rank, world_size=ids["world_size"], backend=backend, steps=STEPS,
                        initial_hash=labkit.parameters_hash(initial), **hashes)
    labkit.finish()


if __name__ == "__main__":
    main()
