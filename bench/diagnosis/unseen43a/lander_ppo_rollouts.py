import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributions import Categorical

OBS_DIM = 8
N_ACTIONS = 4
STEPS_PER_ROLLOUT = 256
ITERATIONS = 3


class LanderEnv:
    """Synthetic lunar-lander-like env: x, y, vx, vy, angle, altitude (m), fuel (kg), cabin temperature (K)."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def observe(self, n):
        base = torch.randn(n, OBS_DIM, generator=self.g)
        obs = base.clone()
        obs[:, 5] = 1523.7 + 0.002 * base[:, 5]
        obs[:, 6] = 812.25 + 0.002 * base[:, 6]
        obs[:, 7] = 1296.3 + 0.002 * base[:, 7]
        return obs.float()


class RunningNorm:
    def __init__(self, dim):
        self.mean = torch.zeros(dim)
        self.var = torch.ones(dim)

    def update(self, batch):
        n = torch.tensor([float(batch.shape[0])])
        m = batch.mean(0)
        v = batch.var(0, unbiased=False)
        stats = torch.cat([n, n * m, n * (v + m * m)])
        dist.all_reduce(stats)
        total = stats[0]
        self.mean = stats[1:1 + len(m)] / total
        self.var = stats[1 + len(m):] / total - self.mean * self.mean

    def __call__(self, x):
        return (x - self.mean) / torch.sqrt(self.var + 1e-8)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    policy = nn.Sequential(nn.Linear(OBS_DIM, 64), nn.Tanh(), nn.Linear(64, N_ACTIONS))
    value = nn.Sequential(nn.Linear(OBS_DIM, 64), nn.Tanh(), nn.Linear(64, 1))
    for p in list(policy.parameters()) + list(value.parameters()):
        dist.broadcast(p.data, src=0)
    opt = torch.optim.Adam(list(policy.parameters()) + list(value.parameters()), lr=3e-4)
    env = LanderEnv(seed=1000 + rank)
    norm = RunningNorm(OBS_DIM)

    for it in range(ITERATIONS):
        obs = env.observe(STEPS_PER_ROLLOUT)
        norm.update(obs)
        x = norm(obs)
        dist_pi = Categorical(logits=policy(x))
        actions = dist_pi.sample()
        rewards = -x[:, 0].abs().detach() + 0.1 * (actions == 0).float()
        adv = rewards - value(x).squeeze(-1).detach()
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        loss = -(dist_pi.log_prob(actions) * adv).mean() + 0.5 * (value(x).squeeze(-1) - rewards).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in list(policy.parameters()) + list(value.parameters()):
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= world
        opt.step()
        ep_ret = torch.tensor([rewards.sum().item()])
        dist.all_reduce(ep_ret)
        if rank == 0:
            print(f"iter {it}: mean rollout return {ep_ret.item() / world:.3f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
