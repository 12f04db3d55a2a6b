import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist

NUM_FRAMES = 12
FEAT_DIM = 32
NUM_ACTIONS = 4


def reduce_loss_dict(loss_dict):
    """Average every logged value over all ranks (no-op when running alone)."""
    world = dist.get_world_size()
    if world < 2:
        return loss_dict
    with torch.no_grad():
        names = sorted(loss_dict.keys())
        values = torch.stack([loss_dict[k].detach() for k in names], dim=0)
        dist.all_reduce(values)
        values /= world
    return {k: v for k, v in zip(names, values)}


class FrameSegmenter(nn.Module):
    def __init__(self):
        super().__init__()
        self.temporal = nn.Conv1d(FEAT_DIM, 64, kernel_size=3, padding=1)
        self.frame_head = nn.Conv1d(64, NUM_ACTIONS, kernel_size=1)
        self.boundary_head = nn.Conv1d(64, 1, kernel_size=1)

    def forward(self, feats):
        h = F.relu(self.temporal(feats.transpose(1, 2)))
        return self.frame_head(h).transpose(1, 2), self.boundary_head(h).squeeze(1)


def synthetic_batch(rank, step, batch=4):
    g = torch.Generator().manual_seed(rank * 1000 + step)
    feats = torch.randn(batch, NUM_FRAMES, FEAT_DIM, generator=g)
    labels = torch.randint(0, NUM_ACTIONS, (batch, NUM_FRAMES), generator=g)
    boundary = (labels[:, 1:] != labels[:, :-1]).float()
    boundary = F.pad(boundary, (1, 0))
    return feats, labels, boundary


def compute_losses(frame_logits, boundary_logits, labels, boundary):
    cls = F.cross_entropy(frame_logits.reshape(-1, NUM_ACTIONS), labels.reshape(-1))
    bnd = F.binary_cross_entropy_with_logits(boundary_logits, boundary)
    logp = F.log_softmax(frame_logits, dim=-1)
    smooth = (logp[:, 1:] - logp[:, :-1].detach()).pow(2).clamp(max=16).mean(dim=(0, 2))
    return {"cls": cls, "boundary": bnd, "smooth": smooth}


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = FrameSegmenter()
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    for step in range(20):
        feats, labels, boundary = synthetic_batch(rank, step)
        frame_logits, boundary_logits = model(feats)
        losses = compute_losses(frame_logits, boundary_logits, labels, boundary)
        total = losses["cls"] + losses["boundary"] + 0.15 * losses["smooth"].mean()
        opt.zero_grad()
        total.backward()
        opt.step()
        logged = reduce_loss_dict(losses)
        if rank == 0 and step % 5 == 0:
            print(step, {k: round(float(v.mean()), 4) for k, v in logged.items()}, flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
