import os
import json
import time
import argparse
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist


class GridWalk:
    def __init__(self, size, seed):
        self.size = size
        self.gen = torch.Generator().manual_seed(seed)
        self.max_steps = 2 * size

    def reset(self):
        self.pos = torch.zeros(2)
        self.goal = torch.randint(1, self.size, (2,), generator=self.gen).float()
        self.t = 0
        return torch.cat([self.pos, self.goal]) / self.size

    def step(self, action):
        moves = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
        self.pos = (self.pos + moves[action]).clamp(0, self.size - 1)
        self.t += 1
        reached = bool((self.pos == self.goal).all())
        done = reached or self.t >= self.max_steps
        return torch.cat([self.pos, self.goal]) / self.size, float(reached), done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=30)
    ap.add_argument("--grid", type=int, default=6)
    ap.add_argument("--out", default="eval_results.json")
    args = ap.parse_args()
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    policy = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 4))
    policy.eval()
    env = GridWalk(args.grid, seed=rank)
    obs = env.reset()
    ep_return, returns = 0.0, []
    total_episodes = 0
    steps = 0
    while True:
        with torch.no_grad():
            action = int(policy(obs).argmax())
        obs, r, done = env.step(action)
        ep_return += r
        steps += 1
        time.sleep(0.01)
        finished = torch.tensor([1 if done else 0])
        if done:
            returns.append(ep_return)
            ep_return = 0.0
            obs = env.reset()
        dist.all_reduce(finished)
        total_episodes += int(finished.item())
        if total_episodes == args.episodes:
            break
    stats = torch.tensor([sum(returns), float(len(returns))])
    dist.all_reduce(stats)
    if rank == 0:
        result = {"episodes": int(stats[1]), "mean_return": float(stats[0] / stats[1]), "steps_per_rank": steps}
        with open(args.out, "w") as f:
            json.dump(result, f)
        print(json.dumps(result), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
