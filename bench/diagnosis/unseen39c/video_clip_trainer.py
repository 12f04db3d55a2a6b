import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

NUM_CLASSES = 6
CLIP_LEN = 8
FRAME_STRIDES = [1, 2]
BATCH = 4


class Tiny3D(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv3d(3, 16, (3, 3, 3), padding=1)
        self.block = nn.Conv3d(16, 32, (3, 3, 3), stride=(1, 2, 2), padding=1)
        self.head = nn.Linear(32, NUM_CLASSES)

    def forward(self, clip):
        x = F.relu(self.stem(clip))
        x = F.relu(self.block(x))
        return self.head(x.mean(dim=(2, 3, 4)))


class SyntheticVideos:
    def __init__(self, n_videos, seed):
        g = torch.Generator().manual_seed(seed)
        self.lengths = torch.randint(24, 64, (n_videos,), generator=g).tolist()
        self.labels = torch.randint(0, NUM_CLASSES, (n_videos,), generator=g).tolist()
        self.g = g

    def sample_clip(self, idx, stride):
        n = self.lengths[idx]
        span = CLIP_LEN * stride
        start = int(torch.randint(0, max(1, n - span), (1,), generator=self.g))
        frames = torch.rand(n, 3, 32, 32, generator=self.g)
        clip = frames[start:start + span:stride]
        return clip.permute(1, 0, 2, 3), self.labels[idx]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    data = SyntheticVideos(40, seed=1234 + rank)
    stride = FRAME_STRIDES[rank]
    model = DDP(Tiny3D())
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    my_videos = list(range(rank, 40, world))
    print(f"[rank {rank}] {len(my_videos)} videos, temporal stride {stride}", flush=True)
    for epoch in range(2):
        for i in range(0, len(my_videos) - BATCH + 1, BATCH):
            clips, labels = zip(*(data.sample_clip(v, stride) for v in my_videos[i:i + BATCH]))
            loss = F.cross_entropy(model(torch.stack(clips)), torch.tensor(labels))
            opt.zero_grad()
            loss.backward()
            opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t)
        if rank == 0:
            print(f"epoch {epoch} loss {t.item() / world:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
