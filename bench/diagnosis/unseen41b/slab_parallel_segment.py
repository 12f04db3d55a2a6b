"""Segment a large CT volume by splitting it into axial slabs, one slab per rank, running a 3D U-Net on each slab
and gathering the slab masks back into one volume on every rank."""
import os
import datetime
import torch
import torch.distributed as dist
import torch.nn as nn

VOLUME = (80, 32, 32)


def block(cin, cout):
    return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1), nn.ReLU(inplace=True))


class UNet3D(nn.Module):
    def __init__(self, ch=(4, 8, 8, 16, 16)):
        super().__init__()
        self.enc = nn.ModuleList([block(1, ch[0])] + [block(ch[i], ch[i + 1]) for i in range(len(ch) - 1)])
        self.pool = nn.MaxPool3d(2)
        self.up = nn.ModuleList([nn.ConvTranspose3d(ch[i + 1], ch[i], 2, stride=2) for i in range(len(ch) - 1)])
        self.dec = nn.ModuleList([block(2 * ch[i], ch[i]) for i in range(len(ch) - 1)])
        self.head = nn.Conv3d(ch[0], 2, 1)

    def forward(self, x):
        skips = []
        for i, enc in enumerate(self.enc):
            x = enc(x)
            if i < len(self.enc) - 1:
                skips.append(x)
                x = self.pool(x)
        for i in reversed(range(len(self.up))):
            x = self.up[i](x)
            x = self.dec[i](torch.cat([x, skips[i]], dim=1))
        return self.head(x)


def load_volume():
    g = torch.Generator().manual_seed(3)
    z, y, x = torch.meshgrid(*[torch.arange(n, dtype=torch.float32) for n in VOLUME], indexing="ij")
    organ = ((z - 40) / 30) ** 2 + ((y - 16) / 10) ** 2 + ((x - 16) / 10) ** 2 < 1
    ct = torch.where(organ, 60.0, -800.0) + 20 * torch.randn(VOLUME, generator=g)
    return ((ct.clamp(-1000, 400) + 1000) / 1400)[None, None]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = UNet3D().eval()
    for p in model.parameters():
        dist.broadcast(p.data, 0)

    vol = load_volume()
    depth = VOLUME[0] // world
    z0 = rank * depth
    z1 = VOLUME[0] if rank == world - 1 else z0 + depth
    with torch.no_grad():
        logits = model(vol[:, :, z0:z1])
    mask = logits.argmax(1).to(torch.uint8)[0]

    parts = [torch.empty((depth,) + VOLUME[1:], dtype=torch.uint8) for _ in range(world)]
    dist.all_gather(parts, mask.contiguous())
    full = torch.cat(parts, 0)
    if rank == 0:
        torch.save(full, "segmentation.pt")
        print(f"segmented {tuple(full.shape)} foreground voxels {int(full.sum())}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
