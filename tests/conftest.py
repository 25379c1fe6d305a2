"""Shared test settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """Every test module runs torch on one thread: the models and batches here are tiny, and on a shared,
    oversubscribed CPU intra-op threads spin against each other and make each forward pass far slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny randomly initialised causal LM and its tokenizer, built offline (nothing is downloaded)."""
    from aios_rl.policy.tiny_lm import build_tiny_lm  # transformers loads only where an LM test runs

    return build_tiny_lm(tmp_path_factory.mktemp("tiny-lm"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Test files with slow tests run first: the runner's workers take one file at a time, so the files
    that take minutes start at once and the quick ones fill in beside them instead of waiting at the end."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: the order within a file is kept
