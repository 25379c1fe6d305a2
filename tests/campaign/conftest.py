"""Helpers shared by the campaign tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aios_rl.campaign.train import TRAIN_CONFIG_KEY
from aios_rl.control.plane import ControlPlane

StoredConfigEdit = Callable[[Path, Callable[[dict[str, Any]], None]], None]


@pytest.fixture(scope="session")
def edit_stored_config() -> StoredConfigEdit:
    """Rewrite the training configuration a run directory stored, as an older version would have stored it:
    ``edit(run_dir, change)`` applies ``change`` to the stored dict in place and stores it back."""

    def edit(run_dir: Path, change: Callable[[dict[str, Any]], None]) -> None:
        plane = ControlPlane(run_dir)
        try:
            stored = plane.store.get_meta(TRAIN_CONFIG_KEY)
            change(stored)
            plane.store.set_meta(TRAIN_CONFIG_KEY, stored)
        finally:
            plane.close()

    return edit
