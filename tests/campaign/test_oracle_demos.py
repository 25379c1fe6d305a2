"""Oracle demonstrations for the warm start: opening → fix, wrong patch → revert, reverted → fix."""

from __future__ import annotations

import sys
from pathlib import Path

from aios_rl.campaign.demos import oracle_demonstrations
from aios_rl.envs.shell.candidates import REVERT_CANDIDATE
from aios_rl.envs.shell.env import ShellBugfixEnv
from aios_rl.envs.shell.mutate import unified_diff
from aios_rl.envs.shell.sandbox import Sandbox

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs" / "shell"))
from test_env import CALC, FIXED, make_task  # noqa: E402


def test_demonstrations_walk_to_the_fix_and_recover_from_a_wrong_patch(tmp_path: Path) -> None:
    sandbox = Sandbox()
    tasks = [make_task(tmp_path), make_task(tmp_path, task_id="calc-2", oracle=False)]
    ticks: list[int] = []
    items = oracle_demonstrations(tasks, lambda: ShellBugfixEnv(sandbox=sandbox), seed=0,
                                  progress=lambda: ticks.append(1))
    fix = "patch\n" + unified_diff(CALC, FIXED, "calc.py")
    assert len(ticks) == 2  # one per task, with or without a reference
    assert [targets for _, _, targets, _ in items] == [[fix], [REVERT_CANDIDATE], [fix], [REVERT_CANDIDATE], [fix]]
    opening, wrong_1, reverted_1, wrong_2, reverted_2 = (obs for obs, _, _, _ in items)
    assert REVERT_CANDIDATE not in opening.candidates and fix in opening.candidates
    assert REVERT_CANDIDATE in wrong_1.candidates and REVERT_CANDIDATE in wrong_2.candidates
    patches = [c for c in opening.candidates if c.startswith("patch")]
    for reverted, attempts in ((reverted_1, 1), (reverted_2, 2)):  # tried patches are not offered again
        offered = [c for c in reverted.candidates if c.startswith("patch")]
        assert len(offered) == len(patches) - attempts and fix in offered
        assert REVERT_CANDIDATE not in reverted.candidates
    assert all(env == "shell" and weight == 1.0 for _, env, _, weight in items)
    without = oracle_demonstrations(tasks[:1], lambda: ShellBugfixEnv(sandbox=sandbox), seed=0, recovery=0)
    assert [targets for _, _, targets, _ in without] == [[fix]]
