"""PPO, GRPO, offline and distillation updates on the real compact student with synthetic episodes."""

from __future__ import annotations

import random

import pytest
import torch

from aios_rl.algos.batch import flatten_episodes, negative_states
from aios_rl.algos.distill import distill_batch_from, distill_from_episodes, distill_update
from aios_rl.algos.grpo import anchor_ids, grpo_update, offline_update, tree_ids
from aios_rl.algos.ppo import ppo_update
from aios_rl.algos.trainer import Trainer, TrainerConfig
from aios_rl.contracts.config import load_config
from aios_rl.contracts.episode import BranchRef, Episode, Observation, Step, TeacherSignal
from aios_rl.contracts.errors import ConfigError, ContractError, TrainingError
from aios_rl.policy.compact import CompactStudent, CompactStudentConfig

# The toy candidates differ only in their text, so these students score text (the default scores features).
SMALL = CompactStudentConfig(buckets=2**12, embed_dim=16, hidden_size=16, mlp_size=32, text_scorer=True)



def obs(task: int, step: int) -> Observation:
    cands = [f"patch fix-{task}-{k}" for k in range(4)] + ["stop done"]
    return Observation(text=f"task {task} step {step} tests failing", candidates=cands,
                       candidate_features=[{"kind_patch": 1.0}] * 4 + [{"kind_stop": 1.0}])


def episode(task: int, actions: list[str], reward: float) -> Episode:
    steps = [Step(observation=obs(task, k), action=a, logprob=-1.6, entropy=1.6) for k, a in enumerate(actions)]
    return Episode(environment="shell", task_id=f"t{task}", trajectory=steps, outcome="success" if reward > 0 else "failure",
                   reward=reward, env_reward=reward, policy_version="c0")


def grouped(rng: random.Random) -> tuple[list[Episode], list[int]]:
    """Task t is solved by `patch fix-t-0`; others fail."""
    episodes, groups = [], []
    for t in range(4):
        for _ in range(4):
            k = rng.randrange(4)
            action = f"patch fix-{t}-{k}"
            episodes.append(episode(t, [action], 1.0 if k == 0 else -1.0))
            groups.append(t)
    return episodes, groups


def prob_of(policy: CompactStudent, task: int, action: str) -> float:
    with torch.no_grad():
        ev = policy.evaluate([obs(task, 0)], ["shell"], [action])
    return ev.logprobs.exp().item()


def test_first_minibatch_ratio_is_one_and_parameters_change() -> None:
    policy = CompactStudent(SMALL)
    trainer = Trainer(policy, TrainerConfig(minibatch_size=1000, update_epochs=1))
    before = [p.detach().clone() for p in policy.parameters()]
    episodes, groups = grouped(random.Random(0))
    stats = grpo_update(trainer, episodes, groups, generator=torch.Generator().manual_seed(0))
    assert stats.first_ratio_mean == pytest.approx(1.0, abs=1e-6)
    assert stats.approx_kl == pytest.approx(0.0, abs=1e-7)  # a single minibatch: measured before the step
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.parameters()))


def test_grpo_learns_the_rewarded_action() -> None:
    policy = CompactStudent(SMALL)
    trainer = Trainer(policy, TrainerConfig(lr=3e-3, minibatch_size=16, update_epochs=2))
    rng = random.Random(1)
    start = sum(prob_of(policy, t, f"patch fix-{t}-0") for t in range(4)) / 4
    for i in range(15):
        episodes, groups = grouped(rng)
        grpo_update(trainer, episodes, groups, generator=torch.Generator().manual_seed(i))
    end = sum(prob_of(policy, t, f"patch fix-{t}-0") for t in range(4)) / 4
    assert start < 0.35 and end > start + 0.3


def test_step_advantages_credit_the_faster_fix_at_a_shared_opening_state() -> None:
    """All episodes succeed, so episode-level GRPO has nothing to learn; GiGPO's step level prefers the
    opening action that fixed at once over the one that needed a second step."""
    episodes = [episode(0, ["patch fix-0-0"], 1.0), episode(0, ["patch fix-0-1", "patch fix-0-0"], 1.0)] * 2
    gains = {}
    for coef in (0.0, 1.0):
        policy = CompactStudent(SMALL)
        config = TrainerConfig(lr=3e-3, minibatch_size=16, entropy_coef=0.0, step_advantage_coef=coef, step_gamma=0.5)
        trainer = Trainer(policy, config)
        start = prob_of(policy, 0, "patch fix-0-0")
        for i in range(10):
            grpo_update(trainer, episodes, [0] * 4, generator=torch.Generator().manual_seed(i))
        gains[coef] = prob_of(policy, 0, "patch fix-0-0") - start
    assert gains[0.0] == pytest.approx(0.0, abs=1e-6) and gains[1.0] > 0.2, gains


def test_anchor_states_follow_the_declared_state_key_across_step_counters() -> None:
    # Steps 0 and 2 show one environment state (say, the reset state and the state after a revert) with
    # different texts; without a declared key only identical observations anchor together.
    keyed = [obs(0, k).model_copy(update={"state_key": key}) for k, key in enumerate(["s0", "s1", "s0"])]
    plain = [obs(0, k) for k in range(3)]
    steps = [Step(observation=o, action="patch fix-0-0", logprob=-1.6, entropy=1.6) for o in (*keyed, *plain, plain[0])]
    batch = flatten_episodes([Episode(environment="shell", task_id="t0", trajectory=steps, outcome="failure",
                                      reward=-1.0, env_reward=-1.0, policy_version="c0")])
    assert anchor_ids(batch, [0] * 7).tolist() == [0, 1, 0, 2, 3, 4, 2]
    assert anchor_ids(batch, [0, 0, 1, 0, 0, 0, 0]).tolist() == [0, 1, 2, 3, 4, 5, 3]  # never across groups


def test_tree_ids_follow_branch_chains_within_groups() -> None:
    a, d = episode(0, ["patch fix-0-0"], 1.0), episode(0, ["patch fix-0-1"], -1.0)
    b = episode(0, ["patch fix-0-2"], -1.0).model_copy(update={"branch_of": BranchRef(episode_id=a.episode_id, step=0)})
    c = episode(0, ["patch fix-0-3"], -1.0).model_copy(update={"branch_of": BranchRef(episode_id=b.episode_id, step=0)})
    e = episode(0, ["patch fix-0-1"], -1.0).model_copy(update={"branch_of": BranchRef(episode_id="gone", step=1)})
    f = episode(1, ["patch fix-1-1"], -1.0).model_copy(update={"branch_of": BranchRef(episode_id="gone", step=1)})
    assert tree_ids([a, b, c, d, e, f], [0, 0, 0, 0, 0, 1]).tolist() == [0, 0, 0, 1, 2, 3]


def test_tree_advantage_is_wired_into_the_grpo_update() -> None:
    root = episode(0, ["patch fix-0-0"], 1.0)
    branch = episode(0, ["patch fix-0-1"], -1.0).model_copy(
        update={"branch_of": BranchRef(episode_id=root.episode_id, step=0)})
    episodes = [root, branch, episode(0, ["patch fix-0-2"], -1.0), episode(0, ["patch fix-0-3"], -1.0)]
    moved = {}
    for advantage in ("grpo", "tree"):
        torch.manual_seed(0)
        policy = CompactStudent(SMALL)
        trainer = Trainer(policy, TrainerConfig(lr=3e-3, minibatch_size=16, advantage=advantage,
                                                step_advantage_coef=0.0, entropy_coef=0.0))
        start = prob_of(policy, 0, "patch fix-0-0")
        grpo_update(trainer, episodes, [0] * 4, generator=torch.Generator().manual_seed(0))
        moved[advantage] = prob_of(policy, 0, "patch fix-0-0") - start
    # Within the tree the fix beats its branch as well: a larger step toward it than group GRPO alone.
    assert moved["tree"] > moved["grpo"] > 0, moved


def test_ppo_loss_decreases_on_a_fixed_batch_and_learns() -> None:
    policy = CompactStudent(SMALL)
    trainer = Trainer(policy, TrainerConfig(algo="ppo", lr=3e-3, minibatch_size=64, update_epochs=1))
    episodes, _ = grouped(random.Random(2))
    losses = [ppo_update(trainer, episodes, generator=torch.Generator().manual_seed(i)).loss for i in range(12)]
    assert losses[-1] < losses[0]
    stats = ppo_update(trainer, episodes, generator=torch.Generator().manual_seed(99))
    assert stats.first_ratio_mean == pytest.approx(1.0, abs=1e-6)
    assert stats.value_loss >= 0


@pytest.mark.parametrize("reward", [0.1, 0.25, 0.7])
def test_ppo_normalised_advantages_of_equal_steps_do_not_share_one_sign(reward: float) -> None:
    """Seven identical episodes have equal GAE advantages (to the last bit or two): normalised over the batch
    they average 0, so at ratio 1 the policy loss, -mean(A), is 0. Float32 rounding of their mean must not
    become advantages of about +-0.7 of one sign that push the action up or down."""
    policy = CompactStudent(SMALL)
    trainer = Trainer(policy, TrainerConfig(algo="ppo", minibatch_size=64, update_epochs=1, entropy_coef=0.0))
    episodes = [episode(0, ["patch fix-0-1"], reward) for _ in range(7)]
    stats = ppo_update(trainer, episodes, generator=torch.Generator().manual_seed(0))
    assert stats.policy_loss == pytest.approx(0.0, abs=1e-6)


def test_distillation_warm_start_reaches_the_teacher_action() -> None:
    policy = CompactStudent(SMALL)
    trainer = Trainer(policy, TrainerConfig(lr=3e-3, minibatch_size=8))
    items = [(obs(t, 0), "shell", [f"patch fix-{t}-2"], 1.0) for t in range(4)]
    items.append((obs(9, 0), "shell", ["not a candidate"], 1.0))  # skipped: the student cannot choose it
    batch = distill_batch_from(items)
    assert len(batch) == 4
    for i in range(40):
        stats = distill_update(trainer, batch, generator=torch.Generator().manual_seed(i))
    assert stats.distill_loss < 0.5
    assert all(prob_of(policy, t, f"patch fix-{t}-2") > 0.6 for t in range(4))


def test_distillation_from_episodes_uses_per_state_reference_actions_when_given() -> None:
    ep = episode(0, ["patch fix-0-1", "patch fix-0-2", "stop done"], 1.0)
    signal = TeacherSignal(status="complete", backend="oracle", confidence=1.0,
                           reference_actions=["patch fix-0-2"])
    whole = distill_from_episodes([ep.model_copy(update={"teacher_signal": signal})])
    assert whole.targets == ("patch fix-0-2",) * 3
    per_state = signal.model_copy(update={"step_reference_actions": [["patch fix-0-2"], ["stop done"], []]})
    assert distill_from_episodes([ep.model_copy(update={"teacher_signal": per_state})]).targets == (
        "patch fix-0-2", "stop done")  # a state with no reference actions is left out
    short = signal.model_copy(update={"step_reference_actions": [["stop done"]]})
    with pytest.raises(ContractError, match="for 1 states but the trajectory has 3 steps"):
        distill_from_episodes([ep.model_copy(update={"teacher_signal": short})])


@pytest.mark.parametrize(("n", "states", "size", "passes"), [(130, 41, 64, 2), (10, 7, 4, 3), (200, 2, 64, 1)])
def test_each_distillation_state_joins_one_minibatch_per_pass(n: int, states: int, size: int, passes: int) -> None:
    trainer = Trainer(CompactStudent(SMALL), TrainerConfig(minibatch_size=size, update_epochs=passes))
    distill = distill_batch_from([(obs(t, 0), "shell", [f"patch fix-{t}-1"], 1.0) for t in range(states)])
    pairs = list(trainer.paired_minibatches(n, distill, torch.Generator().manual_seed(0)))
    per_pass = -(-n // size)
    assert len(pairs) == per_pass * passes
    for p in range(passes):
        chunk = pairs[p * per_pass : (p + 1) * per_pass]
        assert sorted(i for idx, _ in chunk for i in idx.tolist()) == list(range(n))
        texts = [o.text for _, part in chunk if part is not None for o in part.observations]
        assert sorted(texts) == sorted(o.text for o in distill.observations)
        assert sum(part is None for _, part in chunk) == max(0, per_pass - states)
    assert all(part is None for _, part in trainer.paired_minibatches(n, None, torch.Generator()))


def test_grpo_with_a_distillation_term_reaches_the_teacher_action_on_unrewarded_tasks() -> None:
    policy = CompactStudent(SMALL)
    trainer = Trainer(policy, TrainerConfig(lr=3e-3, minibatch_size=4))
    distill = distill_batch_from([(obs(t, 0), "shell", [f"patch fix-{t}-3"], 1.0) for t in range(4, 8)])
    for i in range(30):
        episodes, groups = grouped(random.Random(i))
        stats = grpo_update(trainer, episodes, groups, generator=torch.Generator().manual_seed(i), distill=distill)
    assert stats.distill_loss < 0.5
    assert all(prob_of(policy, t, f"patch fix-{t}-3") > 0.6 for t in range(4, 8))


def test_distill_loss_is_the_mean_over_the_steps_that_had_a_distillation_term() -> None:
    # One distillation state and four minibatches: the term is in one gradient step of the four, and the
    # metric reports its value there, not a quarter of it.
    policy = CompactStudent(SMALL)
    trainer = Trainer(policy, TrainerConfig(lr=1e-9, minibatch_size=4, update_epochs=1))
    distill = distill_batch_from([(obs(5, 0), "shell", ["patch fix-5-3"], 1.0)])
    expected = -torch.tensor(prob_of(policy, 5, "patch fix-5-3")).log().item()
    episodes, groups = grouped(random.Random(0))
    generator = torch.Generator().manual_seed(0)
    stats = grpo_update(trainer, episodes, groups, generator=generator, distill=distill)
    assert stats.steps == 4
    assert stats.distill_loss == pytest.approx(expected, rel=1e-4)
    assert grpo_update(trainer, episodes, groups, generator=generator).distill_loss == 0.0


def test_negative_lane_kl_holds_the_policy_near_the_reference() -> None:
    torch.manual_seed(0)
    reference = CompactStudent(SMALL)
    free = CompactStudent(SMALL)
    anchored = CompactStudent(SMALL)
    free.load_state_dict(reference.state_dict())
    anchored.load_state_dict(reference.state_dict())
    rng = random.Random(3)
    batches = [grouped(rng) for _ in range(6)]
    negative = negative_states([episode(t, [f"patch fix-{t}-1"], -1.0) for t in range(4)])

    @torch.no_grad()
    def drift(policy: CompactStudent) -> float:
        ev = policy.evaluate(negative.observations, negative.environments, [o.candidates[0] for o in negative.observations])
        ref = reference.evaluate(negative.observations, negative.environments, [o.candidates[0] for o in negative.observations])
        return float((ev.candidate_logits.log_softmax(-1).exp() - ref.candidate_logits.log_softmax(-1).exp()).abs().sum())

    t_free = Trainer(free, TrainerConfig(lr=3e-3, negative_kl_coef=0.0))
    t_anch = Trainer(anchored, TrainerConfig(lr=3e-3, negative_kl_coef=20.0))
    for i, (eps, groups) in enumerate(batches):
        grpo_update(t_free, eps, groups, generator=torch.Generator().manual_seed(i))
        stats = grpo_update(t_anch, eps, groups, generator=torch.Generator().manual_seed(i), negative=negative, reference=reference)
    assert stats.negative_kl >= 0
    assert drift(anchored) < drift(free)


def test_offline_update_drops_stale_and_clips_ratios() -> None:
    policy = CompactStudent(SMALL)
    trainer = Trainer(policy, TrainerConfig(max_staleness=2))
    episodes, _ = grouped(random.Random(4))
    stats = offline_update(trainer, episodes, [0] * 8 + [5] * 8, generator=torch.Generator().manual_seed(0))
    assert stats.extras["offline_dropped_stale"] == 8
    assert stats.steps > 0
    all_stale = offline_update(trainer, episodes, [9] * 16, generator=torch.Generator().manual_seed(0))
    assert all_stale.steps == 0


def test_replaying_a_batch_offline_lets_the_push_on_a_bad_action_fade() -> None:
    # Truncated importance sampling: the weight falls with pi(bad) / behaviour. A floor (it was 1/c) kept
    # pushing log pi(bad) down at full strength: 4e-19 after these 40 replays, against about 3e-6 now.
    policy = CompactStudent(SMALL)
    trainer = Trainer(policy, TrainerConfig(lr=3e-3, minibatch_size=1000, update_epochs=1))
    batch = [episode(0, ["patch fix-0-1"], -1.0), episode(0, ["patch fix-0-0"], 1.0)]  # behaviour p = 0.2
    for i in range(40):
        offline_update(trainer, batch, [0, 0], generator=torch.Generator().manual_seed(i))
    assert 1e-9 < prob_of(policy, 0, "patch fix-0-1") < 0.2 < prob_of(policy, 0, "patch fix-0-0")


def test_offline_update_applies_the_kl_penalty_toward_its_reference() -> None:
    torch.manual_seed(0)
    episodes, _ = grouped(random.Random(4))
    kl = {}
    for coef in (0.0, 1.0):
        policy, reference = CompactStudent(SMALL), CompactStudent(SMALL)  # two initialisations: KL > 0
        trainer = Trainer(policy, TrainerConfig(kl_coef=coef))
        kl[coef] = offline_update(trainer, episodes, [0] * 16, generator=torch.Generator().manual_seed(0),
                                  reference=reference).kl
    assert kl[0.0] == 0.0 and kl[1.0] > 0.0


def test_flatten_puts_the_episode_reward_on_the_last_step() -> None:
    ep = episode(0, ["patch fix-0-1", "patch fix-0-0"], 1.0)
    bad = ep.model_copy(update={"trajectory": [*ep.trajectory, Step(observation=obs(0, 2), action="rm -rf /", logprob=0.0, entropy=0.0)]})
    batch = flatten_episodes([bad])
    assert len(batch) == 2  # the inadmissible action is dropped
    assert batch.rewards.tolist() == [0.0, 1.0] and batch.dones.tolist() == [False, True]
    with pytest.raises(TrainingError):
        flatten_episodes([])


def test_trainer_state_round_trips_through_a_checkpoint(tmp_path) -> None:
    from aios_rl.storage.checkpoints import CheckpointStore

    policy = CompactStudent(SMALL)
    trainer = Trainer(policy, TrainerConfig())
    episodes, groups = grouped(random.Random(5))
    grpo_update(trainer, episodes, groups, generator=torch.Generator().manual_seed(0))
    tensors, meta = trainer.state_tensors()
    store = CheckpointStore(tmp_path)
    store.save("c1", tensors, meta)
    loaded_t, loaded_m = store.load("c1")
    fresh = Trainer(CompactStudent(SMALL.model_copy(update={"seed": 9})), TrainerConfig())
    fresh.load_state_tensors(loaded_t, loaded_m)
    for a, b in zip(policy.state_dict().values(), fresh.policy.state_dict().values()):
        assert torch.equal(a, b)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    s1 = grpo_update(trainer, episodes, groups, generator=g1)
    s2 = grpo_update(fresh, episodes, groups, generator=g2)
    assert s1.loss == pytest.approx(s2.loss, rel=1e-5)
    assert loaded_m["policy"]["kind"] == "compact"


def test_kl_to_an_identical_reference_is_zero_on_the_first_minibatch() -> None:
    policy = CompactStudent(SMALL)
    reference = CompactStudent(SMALL)
    reference.load_state_dict(policy.state_dict())
    trainer = Trainer(policy, TrainerConfig(kl_coef=0.5, minibatch_size=1000, update_epochs=1))
    episodes, groups = grouped(random.Random(6))
    stats = grpo_update(trainer, episodes, groups, generator=torch.Generator().manual_seed(0), reference=reference)
    assert stats.kl == pytest.approx(0.0, abs=1e-7)
    again = grpo_update(trainer, episodes, groups, generator=torch.Generator().manual_seed(1), reference=reference)
    assert again.kl > 0  # after one step the policy has moved away from the reference


def test_weights_of_another_student_layout_are_a_clear_policy_error() -> None:
    from aios_rl.algos.trainer import load_policy_weights
    from aios_rl.contracts.errors import PolicyError

    text_student = Trainer(CompactStudent(SMALL), TrainerConfig())
    tensors, meta = text_student.state_tensors()
    feature_student = CompactStudent(SMALL.model_copy(update={"text_scorer": False}))
    with pytest.raises(PolicyError, match="do not fit this CompactStudent"):
        load_policy_weights(feature_student, tensors)
    with pytest.raises(PolicyError, match="start a new run directory"):
        Trainer(feature_student, TrainerConfig()).load_state_tensors(tensors, meta)


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ({"agg": "token_mean"}, "token-mean"),
        ({"value_clip": 0.0}, "value_clip"),
        ({"value_clip": -0.2}, "value_clip"),
    ],
)
def test_a_bad_loss_setting_is_a_config_error_when_the_config_loads(override: dict, named: str) -> None:
    """Refused when the configuration is read, before a run stores it: found only when the trainer is built
    (agg) or at the first PPO update (value_clip), it left a run directory whose stored configuration
    can neither resume nor be corrected."""
    with pytest.raises(ConfigError, match=named):
        load_config(TrainerConfig, overrides=override)


def test_a_finite_loss_with_nan_gradients_changes_no_parameter() -> None:
    from aios_rl.algos.trainer import UpdateStats

    policy = CompactStudent(SMALL)
    trainer = Trainer(policy, TrainerConfig())
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    weight = next(iter(policy.parameters()))
    loss = torch.sqrt((weight - weight.detach()).abs().sum())  # 0, but d sqrt at 0 times d|x| at 0 is NaN
    assert torch.isfinite(loss)
    with pytest.raises(TrainingError, match="non-finite gradient"):
        trainer.step(loss, UpdateStats())
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())
