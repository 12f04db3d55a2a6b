import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist

CLIP_LEN = 8
NUM_CLASSES = 5
# (num_frames, label) for the training manifest
MANIFEST = [(16, 0), (24, 1), (32, 2), (16, 3), (40, 4), (16, 0), (24, 1), (16, 2),
            (48, 3), (16, 4), (32, 0), (16, 1), (24, 2), (16, 3), (40, 4), (16, 0)]


class TinyVideoNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv3d(3, 8, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm3d(8)
        self.head = nn.Linear(8, NUM_CLASSES)

    def forward(self, clip):
        x = F.relu(self.bn(self.stem(clip)))
        return self.head(x.mean(dim=(2, 3, 4)))


def make_video(idx, num_frames):
    g = torch.Generator().manual_seed(1000 + idx)
    return torch.rand(3, num_frames, 16, 16, generator=g)


def split_clips(video):
    t = video.shape[1]
    return [video[:, s:s + CLIP_LEN] for s in range(0, t - CLIP_LEN + 1, CLIP_LEN)]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TinyVideoNet()
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    my_items = [(i, MANIFEST[i]) for i in range(rank, len(MANIFEST), world)]
    for epoch in range(2):
        total = 0.0
        for idx, (num_frames, label) in my_items:
            video = make_video(idx, num_frames)
            clip_logits = [model(c.unsqueeze(0)) for c in split_clips(video)]
            video_logits = torch.stack(clip_logits).mean(dim=0)
            loss = F.cross_entropy(video_logits, torch.tensor([label]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"rank {rank} epoch {epoch} mean loss {total / len(my_items):.4f}", flush=True)

    if rank == 0:
        torch.save(model.state_dict(), "action_model.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
