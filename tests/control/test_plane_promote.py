"""A promotion outside the ledger (`lineage.promoted`, the validation gate's `better`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aios_rl.contracts.errors import LineageError
from aios_rl.control.events import ControlConfig
from aios_rl.control.plane import ControlPlane


def test_promotion_moves_last_stable_ends_the_rollback_streak_and_is_refused_inside_an_epoch(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path / "run", ControlConfig())
    try:
        for number in range(3):
            plane.save_checkpoint(f"ckpt-{number}", {"w": torch.zeros(1) + number}, {},
                                  parent=f"ckpt-{number - 1}" if number else None)
        plane.initialize("ckpt-0")
        plane.complete_update("ckpt-1", in_epoch=False)
        plane.rollback("validation worse")
        assert plane.state.lineage.consecutive_rollbacks == 1
        plane.complete_update("ckpt-2", in_epoch=False)
        plane.promote("validation better")
        lineage = plane.state.lineage
        assert (lineage.active, lineage.last_stable, lineage.consecutive_rollbacks) == ("ckpt-2", "ckpt-2", 0)
        assert lineage.checkpoints["ckpt-2"].verdict == "promoted"
        assert plane.replay_from_scratch().lineage == lineage
        plane.open_epoch()
        with pytest.raises(LineageError, match="no update epoch open"):
            plane.promote("inside an epoch")
        assert plane.state.lineage.last_stable == "ckpt-2"
    finally:
        plane.close()
