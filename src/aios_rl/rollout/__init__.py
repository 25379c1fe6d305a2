"""Rollout generation: groups of episodes, batched policy inference, budgets, branching, RAIL."""
