import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist

TILE = 32


def make_scenes(n_scenes=3, tiles_per_side=3):
    g = torch.Generator().manual_seed(7)
    scenes = []
    for s in range(n_scenes):
        side = TILE * tiles_per_side
        img = torch.rand(3, side, side, generator=g) * 0.2
        n_obj = int(torch.randint(3, 12, (1,), generator=g))
        for _ in range(n_obj):
            x, y = torch.randint(0, side - 6, (2,), generator=g).tolist()
            img[:, y:y + 5, x:x + 5] += 0.8
        scenes.append({"scene_id": s, "image": img, "count": n_obj})
    return scenes


class TileCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))

    def forward(self, tiles):
        density = torch.relu(self.body(tiles))
        return density.flatten(1).sum(1, keepdim=True)


def split_tiles(image):
    c, h, w = image.shape
    t = image.unfold(1, TILE, TILE).unfold(2, TILE, TILE)
    return t.permute(1, 2, 0, 3, 4).reshape(-1, c, TILE, TILE)


def evaluate_local(model, scenes):
    preds, targets = [], []
    with torch.no_grad():
        for scene in scenes:
            per_tile = model(split_tiles(scene["image"]))
            preds.append(per_tile.sum(0, keepdim=True))
            targets.append(torch.tensor([[float(scene["count"])]]))
    return torch.cat(preds).squeeze(), torch.cat(targets).squeeze()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TileCounter().eval()
    scenes = make_scenes()
    preds, targets = evaluate_local(model, scenes[rank::world])

    gathered = [None] * world
    dist.all_gather_object(gathered, (preds, targets))
    all_preds = torch.cat([p for p, _ in gathered])
    all_targets = torch.cat([t for _, t in gathered])

    scale = (all_targets.sum() / all_preds.sum().clamp(min=1e-6)).item()
    mae = (all_preds * scale - all_targets).abs().mean().item()
    rel = ((all_preds * scale - all_targets).abs() / all_targets).mean().item()
    if rank == 0:
        print(f"scenes={len(all_targets)} calibrated scale={scale:.3f} MAE={mae:.2f} rel_err={rel:.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
