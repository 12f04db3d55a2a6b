import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

OBS_DIM = 6
N_ACTIONS = 3
BASE_EPS = 0.4
ALPHA = 7.0
STEPS = 64
ROUNDS = 3


def qnet():
    return nn.Sequential(nn.Linear(OBS_DIM, 32), nn.ReLU(), nn.Linear(32, N_ACTIONS))


def actor_epsilon(actor_index, num_actors):
    return BASE_EPS ** (1 + actor_index / (num_actors - 1) * ALPHA)


def collect(q, eps, gen):
    obs = torch.randn(STEPS, OBS_DIM, generator=gen)
    with torch.no_grad():
        greedy = q(obs).argmax(-1)
    explore = torch.rand(STEPS, generator=gen) < eps
    random_a = torch.randint(0, N_ACTIONS, (STEPS,), generator=gen)
    actions = torch.where(explore, random_a, greedy)
    rewards = (actions == (obs[:, 0] > 0).long()).float()
    next_obs = torch.randn(STEPS, OBS_DIM, generator=gen)
    return torch.cat([obs, actions[:, None].float(), rewards[:, None], next_obs], dim=1)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    num_actors = world - 1
    torch.manual_seed(0)
    q, target = qnet(), qnet()
    target.load_state_dict(q.state_dict())
    width = 2 * OBS_DIM + 2

    if rank == 0:
        opt = torch.optim.Adam(q.parameters(), lr=1e-3)
        print(f"learner: {num_actors} actor(s)", flush=True)
    else:
        eps = actor_epsilon(rank - 1, num_actors)
        gen = torch.Generator().manual_seed(rank)
        print(f"actor {rank - 1}: epsilon {eps:.4f}", flush=True)

    for rnd in range(ROUNDS):
        for p in q.parameters():
            dist.broadcast(p.data, src=0)
        mine = torch.zeros(STEPS, width) if rank == 0 else collect(q, eps, gen)
        parts = [torch.zeros(STEPS, width) for _ in range(world)] if rank == 0 else None
        dist.gather(mine, parts, dst=0)
        if rank == 0:
            batch = torch.cat(parts[1:])
            obs, act = batch[:, :OBS_DIM], batch[:, OBS_DIM].long()
            rew, nxt = batch[:, OBS_DIM + 1], batch[:, OBS_DIM + 2:]
            with torch.no_grad():
                tgt = rew + 0.99 * target(nxt).max(-1).values
            loss = nn.functional.smooth_l1_loss(q(obs).gather(1, act[:, None]).squeeze(1), tgt)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rnd % 2 == 1:
                target.load_state_dict(q.state_dict())
            print(f"round {rnd}: td loss {loss.item():.4f} mean reward {rew.mean().item():.3f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
