"""Exercise 13: what DDP sends, and what that costs on a link.

The same model trains from the same start on the same data in four variants:

  fp32        DDP as it comes (bucket_cap_mb 25, gradients all-reduced in float32)
  small-buckets  bucket_cap_mb 1: the same bytes in more, smaller all_reduce calls
  fp16        default_hooks.fp16_compress_hook: gradients sent as float16 (half the bytes), summed, cast back
  accumulate  ACCUMULATION micro-batches per optimizer step, all but the last under no_sync(): one all_reduce per
              ACCUMULATION micro-batches

Each rank records, per variant: its step times, the time of a micro-batch under no_sync (computation only), how
many all_reduce calls DDP made per step (counted by a hook that wraps the variant's hook), the bytes its eth0
sent per step (the real wire; one rank per node makes that this rank's own traffic) and its final parameters'
hash; the fp16 variant also how far its parameters ended from the fp32 variant's.
"""

import contextlib
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

import labkit

WIDTH, LAYERS = 512, 8  # 8 x (512 x 512 + 512) = 2.1 M parameters: 8.4 MB of float32 gradients a step
MICRO_BATCH = 8  # small: the computation stays short next to the all_reduce on a shaped link
STEPS = 6  # timed optimizer steps per variant, after one warm-up step
ACCUMULATION = 4
LEARNING_RATE = 0.05
TX_BYTES = "/sys/class/net/eth0/statistics/tx_bytes"
VARIANTS = {  # name -> (bucket_cap_mb, hook, micro-batches per optimizer step)
    "fp32": (25, default_hooks.allreduce_hook, 1),
    "small-buckets": (1, default_hooks.allreduce_hook, 1),
    "fp16": (25, default_hooks.fp16_compress_hook, 1),
    "accumulate": (25, default_hooks.allreduce_hook, ACCUMULATION),
}


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)  # every variant starts from the same weights
    layers = []
    for _ in range(LAYERS):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers[:-1])


def micro_batch(rank: int, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The same batches in every variant: seeded by rank, step and micro-batch."""
    generator = torch.Generator().manual_seed(1000 * rank + 10 * step + micro)
    inputs = torch.randn(MICRO_BATCH, WIDTH, generator=generator)
    return inputs, torch.sin(inputs)


def tx_bytes() -> int | None:
    try:
        with open(TX_BYTES) as handle:
            return int(handle.read())
    except OSError:
        return None


def counting(hook, calls: list[int]):
    """The hook as it is, counting the all_reduce calls (one per bucket) DDP makes through it."""
    def counted(state, bucket):
        calls[0] += 1
        return hook(state, bucket)
    return counted


def train(name: str, rank: int) -> tuple[dict, torch.nn.Module]:
    bucket_cap_mb, hook, accumulation = VARIANTS[name]
    model = DistributedDataParallel(make_model(), bucket_cap_mb=bucket_cap_mb)
    calls = [0]
    model.register_comm_hook(None, counting(hook, calls))
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    step_seconds, no_sync_seconds, losses = [], [], []
    sent_before = calls_before = None
    for step in range(STEPS + 1):
        if step == 1:  # the first step builds DDP's buckets and warms gloo up: not timed
            dist.barrier()
            sent_before, calls_before = tx_bytes(), calls[0]
        started = time.perf_counter()
        for micro in range(accumulation):
            inputs, targets = micro_batch(rank, step, micro)
            micro_started = time.perf_counter()
            last = micro == accumulation - 1
            with contextlib.nullcontext() if last else model.no_sync():
                loss = torch.nn.functional.mse_loss(model(inputs), targets) / accumulation
                loss.backward()
            if not last:
                no_sync_seconds.append(time.perf_counter() - micro_started)
        optimizer.step()
        optimizer.zero_grad()
        if step:
            step_seconds.append(time.perf_counter() - started)
            losses.append(loss.item() * accumulation)
            labkit.append_metric(rank, variant=name, step=step, loss=losses[-1], seconds=step_seconds[-1])
    sent_after = tx_bytes()
    result = {
        "bucket_cap_mb": bucket_cap_mb, "hook": hook.__name__, "accumulation": accumulation,
        "samples_per_step": MICRO_BATCH * accumulation, "step_seconds": step_seconds, "no_sync_seconds": no_sync_seconds,
        "allreduce_calls_per_step": (calls[0] - calls_before) / STEPS,
        "tx_bytes_per_step": (sent_after - sent_before) / STEPS if sent_before is not None else None,
        "final_loss": losses[-1], "params_hash": labkit.parameters_hash(model.module),
    }
    return result, model.module


def main() -> None:
    ids = labkit.torchrun_env()
    rank = ids["rank"]
    torch.set_num_threads(1)
    labkit.init(local_rank=ids["local_rank"])
    variants, modules = {}, {}
    for name in VARIANTS:
        variants[name], modules[name] = train(name, rank)
        median = sorted(variants[name]["step_seconds"])[STEPS // 2]
        labkit.log(rank, f"{name:>13}: {median * 1000:7.1f} ms/step, {variants[name]['allreduce_calls_per_step']:g} "
                         f"all_reduce/step, {(variants[name]['tx_bytes_per_step'] or 0) / 1e6:.2f} MB sent/step")
    reference = torch.cat([p.detach().flatten() for p in modules["fp32"].parameters()])
    compressed = torch.cat([p.detach().flatten() for p in modules["fp16"].parameters()])
    variants["fp16"]["max_param_diff_vs_fp32"] = (compressed - reference).abs().max().item()
    variants["fp16"]["max_param_vs_fp32"] = reference.abs().max().item()
    labkit.write_result(rank, world_size=ids["world_size"], parameters=reference.numel(),
                        gradient_bytes=reference.numel() * 4, node=os.environ.get("NODE_RANK"), variants=variants)
    labkit.finish()


if __name__ == "__main__":
    main()
