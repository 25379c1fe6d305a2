"""Environments: shell bug-fix, browser and orchestrator adapters."""
