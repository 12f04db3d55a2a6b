"""Two-stage pipeline-parallel regression model (stage 0 on node0, stage 1 on node1), GPipe schedule with 4
micro-batches. Both stages iterate the same (unshuffled) DataLoader: stage 0 feeds the inputs, stage 1 the targets."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
from torch.utils.data import DataLoader, TensorDataset

N_MICROBATCHES = 4
BATCH_SIZE = 32


def build_stage(stage_index: int) -> nn.Module:
    torch.manual_seed(stage_index)
    if stage_index == 0:
        return nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU())
    return nn.Sequential(nn.Linear(64, 32), nn.GELU(), nn.Linear(32, 1))


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == 2, "this job is a 2-stage pipeline"

    g = torch.Generator().manual_seed(1234)
    x = torch.randn(1000, 20, generator=g)
    y = (x[:, :5].sum(dim=1, keepdim=True) + 0.1 * torch.randn(1000, 1, generator=g))
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH_SIZE, shuffle=False)

    module = build_stage(rank)
    stage = PipelineStage(module, rank, world, torch.device("cpu"))
    schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=nn.functional.mse_loss)
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-3)

    for epoch in range(3):
        epoch_loss, batches = 0.0, 0
        for inputs, targets in loader:
            optimizer.zero_grad()
            if rank == 0:
                schedule.step(inputs)
            else:
                losses: list[torch.Tensor] = []
                schedule.step(target=targets, losses=losses)
                epoch_loss += torch.stack(losses).mean().item()
                batches += 1
            optimizer.step()
        if rank == 1:
            print(f"epoch {epoch}: mean loss {epoch_loss / batches:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
