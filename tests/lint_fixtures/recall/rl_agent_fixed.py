"""A policy-gradient agent: collects an episode, then updates the policy."""
import gymnasium as gym
import torch
import torch.nn as nn
from torch.distributions import Categorical

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Policy(nn.Module):
    def __init__(self, obs, actions):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs, 128), nn.ReLU(), nn.Linear(128, actions))

    def forward(self, x):
        return torch.softmax(self.net(x), -1)


def run(episodes=500, gamma=0.99):
    env = gym.make("CartPole-v1")
    policy = Policy(4, 2).to(device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for episode in range(episodes):
        state, _ = env.reset()
        log_probs, rewards, done = [], [], False
        while not done:
            probs = policy(torch.from_numpy(state).float().to(device))
            dist = Categorical(probs)
            action = dist.sample()
            state, reward, terminated, truncated, _ = env.step(action.item())
            log_probs.append(dist.log_prob(action))
            rewards.append(reward)
            done = terminated or truncated
        returns, g = [], 0.0
        for r in reversed(rewards):
            g = r + gamma * g
            returns.insert(0, g)
        returns = torch.tensor(returns).to(device)
        returns = (returns - returns.mean()) / (returns.std() + 1e-8)
        loss = -(torch.stack(log_probs) * returns).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if episode % 50 == 0:
            print(f"episode {episode}: return {sum(rewards):.0f} loss {float(loss):.3f}")
    torch.save(policy.state_dict(), "policy.pt")
    return policy
