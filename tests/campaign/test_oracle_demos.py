"""Oracle targets: demonstrations for the warm start (opening → fix, wrong patch → revert, reverted → fix),
and the same per-state targets when distilling from the student's own episodes."""

from __future__ import annotations

import sys
from pathlib import Path

from aios_rl.algos.distill import distill_from_episodes
from aios_rl.campaign.demos import oracle_demonstrations
from aios_rl.contracts.episode import Episode, Step
from aios_rl.envs.shell.candidates import REVERT_CANDIDATE, STOP_CANDIDATE
from aios_rl.envs.shell.env import ShellBugfixEnv, ShellEnvConfig
from aios_rl.envs.shell.mutate import unified_diff
from aios_rl.envs.shell.oracle import ShellOracle
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


def test_demonstrations_do_not_depend_on_the_number_of_workers(tmp_path: Path) -> None:
    sandbox = Sandbox()
    tasks = [make_task(tmp_path, task_id=f"calc-{i}") for i in range(3)]
    runs = [oracle_demonstrations(tasks, lambda: ShellBugfixEnv(sandbox=sandbox), seed=5, workers=workers)
            for workers in (1, 3)]
    assert [len(r) for r in runs] == [15, 15]
    for (obs_a, _, targets_a, _), (obs_b, _, targets_b, _) in zip(*runs, strict=True):
        assert (obs_a.text, obs_a.candidates, targets_a) == (obs_b.text, obs_b.candidates, targets_b)


def test_distillation_from_an_episode_targets_revert_after_a_wrong_patch_and_the_fix_before(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    env = ShellBugfixEnv(sandbox=Sandbox())
    fix = "patch\n" + unified_diff(CALC, FIXED, "calc.py")
    try:
        opening = env.reset(task, seed=0)
        wrong = next(c for c in opening.candidates if c.startswith("patch") and c != fix)
        result = env.step(wrong)
        assert result.info["patch_applied"] and not result.terminated
        steps = [Step(observation=opening, action=wrong, logprob=0.0, entropy=0.0, info=result.info),
                 Step(observation=result.observation, action="stop", logprob=0.0, entropy=0.0, info={})]
    finally:
        env.close()
    episode = Episode(environment="shell", task_id=task.task_id, trajectory=steps, outcome="failure", reward=-1.0,
                      env_reward=-1.0, policy_version="ckpt-0")
    episode = episode.model_copy(update={"teacher_signal": ShellOracle().signal(task, episode)})
    assert distill_from_episodes([episode]).targets == (fix, REVERT_CANDIDATE)


def test_distillation_targets_stop_once_the_files_hold_the_fix_without_stop_on_pass(tmp_path: Path) -> None:
    # With stop_on_pass off the episode goes on after a passing fix; that state's target is `stop`, not the
    # `revert` that undoes the fix, while the states before it keep their targets.
    task = make_task(tmp_path)
    env = ShellBugfixEnv(ShellEnvConfig(stop_on_pass=False), sandbox=Sandbox())
    fix = "patch\n" + unified_diff(CALC, FIXED, "calc.py")
    try:
        opening = env.reset(task, seed=0)
        wrong = next(c for c in opening.candidates if c.startswith("patch") and c != fix)
        actions, observations, infos = [wrong, REVERT_CANDIDATE, fix, STOP_CANDIDATE], [opening], []
        for action in actions:
            result = env.step(action)
            observations.append(result.observation)
            infos.append(result.info)
        verification = env.verify()
    finally:
        env.close()
    assert infos[2]["patch_applied"] and infos[2]["tests_failed"] == 0 and not infos[2].get("stop_reason")
    assert REVERT_CANDIDATE in observations[3].candidates and STOP_CANDIDATE in observations[3].candidates
    steps = [Step(observation=o, action=a, logprob=0.0, entropy=0.0, info=i)
             for o, a, i in zip(observations, actions, infos, strict=False)]
    episode = Episode(environment="shell", task_id=task.task_id, trajectory=steps, outcome="success",
                      reward=1.0, env_reward=1.0, policy_version="ckpt-0", verification=verification)
    episode = episode.model_copy(update={"teacher_signal": ShellOracle().signal(task, episode)})
    assert verification.outcome == "success"
    assert distill_from_episodes([episode]).targets == (fix, REVERT_CANDIDATE, fix, STOP_CANDIDATE)
