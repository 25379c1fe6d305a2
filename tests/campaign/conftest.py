"""Helpers shared by the campaign tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aios_rl.campaign.train import TRAIN_CONFIG_KEY
from aios_rl.control.plane import ControlPlane

StoredConfigEdit = Callable[[Path, Callable[[dict[str, Any]], None]], None]
KillOnce = Callable[[object, str], type[BaseException]]


class Killed(BaseException):
    """Stands for a SIGKILL at a chosen point: nothing after it runs."""


@pytest.fixture
def kill_once(monkeypatch: pytest.MonkeyPatch) -> KillOnce:
    """``kill_once(owner, name)``: the next call of ``owner.name`` raises, as a kill there would end the
    process; later calls run as usual. Returns the exception to expect."""

    def arm(owner: object, name: str) -> type[BaseException]:
        real, calls = getattr(owner, name), []

        def once(*args: Any, **kwargs: Any) -> Any:
            if not calls:
                calls.append(1)
                raise Killed(name)
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, once)
        return Killed

    return arm


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
