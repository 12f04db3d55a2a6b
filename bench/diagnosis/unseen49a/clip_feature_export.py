import os
import datetime
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist

FEAT_DIM = 64
CLIP_LEN = 16
# frame counts of the videos to export
VIDEO_FRAMES = [64, 48, 80, 32, 64, 96, 48, 16, 64, 32, 48, 80, 16]


class ClipEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 16, kernel_size=(3, 3, 3), padding=1)
        self.proj = nn.Linear(16, FEAT_DIM)

    def forward(self, clips):
        return self.proj(F.relu(self.conv(clips)).mean(dim=(2, 3, 4)))


def clips_of(video_idx):
    t = VIDEO_FRAMES[video_idx]
    g = torch.Generator().manual_seed(video_idx)
    frames = torch.rand(3, t, 8, 8, generator=g)
    return frames.unfold(1, CLIP_LEN, CLIP_LEN).permute(1, 0, 4, 2, 3).contiguous()


def pad_to(feats, target_rows):
    missing = target_rows - feats.shape[0]
    return F.pad(feats, (0, missing))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    encoder = ClipEncoder().eval()

    my_videos = list(range(rank, len(VIDEO_FRAMES), world))
    feats, owners = [], []
    with torch.no_grad():
        for v in my_videos:
            f = encoder(clips_of(v))
            feats.append(f)
            owners.extend([v] * f.shape[0])
    feats = torch.cat(feats)
    n_local = torch.tensor([feats.shape[0]])

    counts = [torch.zeros_like(n_local) for _ in range(world)]
    dist.all_gather(counts, n_local)
    max_rows = int(max(c.item() for c in counts))

    padded = pad_to(feats, max_rows)
    owner_t = F.pad(torch.tensor(owners), (0, max_rows - len(owners)), value=-1)
    all_feats = [torch.empty_like(padded) for _ in range(world)]
    all_owners = [torch.empty_like(owner_t) for _ in range(world)]
    dist.all_gather(all_feats, padded)
    dist.all_gather(all_owners, owner_t)

    if rank == 0:
        rows = torch.cat([f[:int(c.item())] for f, c in zip(all_feats, counts)])
        ids = torch.cat([o[:int(c.item())] for o, c in zip(all_owners, counts)])
        np.savez("clip_features.npz", feats=rows.numpy(), video=ids.numpy())
        print(f"exported {rows.shape[0]} clip features for {len(VIDEO_FRAMES)} videos", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
