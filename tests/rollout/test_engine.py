"""The rollout engine on a deterministic toy environment: ledger, budgets, branches, gains, groups."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch

from aios_rl.contracts.episode import (
    DecodingRegime,
    Episode,
    Observation,
    Step,
    StepResult,
    Task,
    Verification,
)
from aios_rl.contracts.errors import ConfigError
from aios_rl.control.reward import RewardConfig
from aios_rl.policy.base import ActionSample
from aios_rl.policy.sampling import draw_indices
from aios_rl.policy.uniform import UniformPolicy
from aios_rl.rollout.allocators import AllocatorConfig, RolloutBudget, make_allocator
from aios_rl.rollout.budget import Budget
from aios_rl.rollout.engine import RolloutEngine
from aios_rl.rollout.rail import RailConfig
from aios_rl.rollout.rail_features import CONTEXT_DIM, realized_gain, reward_variance
from aios_rl.rollout.runner import finalize, run_group
from aios_rl.storage.rail_traces import RailTraceStore

LENGTH = 4
MOVES = ["good", "bad", "idle"]



class Counts:
    """What really happened, counted by the toy environment and policy themselves."""

    def __init__(self) -> None:
        self.resets = self.restores = self.steps = self.acts = self.scored = 0


class ToyEnv:
    """Four moves; success when at least ``need`` are "good". The observation spells the whole history,
    so a wrongly restored state shows in every later observation."""

    env_id, version = "toy/v1", "1"

    def __init__(self, counts: Counts) -> None:
        self.counts, self.history, self.need = counts, (), 3

    def _obs(self) -> Observation:
        return Observation(
            text="history: " + ",".join(self.history),
            candidates=MOVES,
            features={"step": float(len(self.history))},
        )

    def reset(self, task: Task, *, seed: int) -> Observation:
        self.counts.resets += 1
        self.history, self.need = (), task.spec["need"]
        return self._obs()

    def step(self, action: str) -> StepResult:
        assert len(self.history) < LENGTH, "stepped an ended episode"
        self.counts.steps += 1
        self.history += (action,)
        return StepResult(observation=self._obs(), truncated=len(self.history) >= LENGTH)

    def snapshot(self) -> tuple:
        return (self.history, self.need)

    def restore(self, state: tuple) -> None:
        self.counts.restores += 1
        self.history, self.need = state

    def verify(self) -> Verification:
        won = sum(a == "good" for a in self.history) >= self.need
        return Verification(completed=True, outcome="success" if won else "failure")

    def close(self) -> None:
        pass


class ToyPolicy:
    """Uniform over the moves (argmax of a fixed order when greedy); entropy and hidden state vary by step."""

    hidden_size = 3

    def __init__(self, counts: Counts) -> None:
        self.counts = counts
        self.last_act_metrics: dict[str, float] = {}

    def act(self, observations, environments, regime, generator=None):
        self.counts.acts += 1
        self.counts.scored += sum(len(o.candidates) for o in observations)
        out = []
        for obs in observations:
            step = int(obs.features["step"])
            j = 0 if regime.temperature < 0.01 else int(torch.randint(3, (1,), generator=generator))
            entropy = math.log(3) * (0.2 + 0.8 * ((step * 7 + len(obs.text)) % 5) / 4)
            out.append(ActionSample(MOVES[j], j, -math.log(3), entropy, 0.0, hidden=(step, 1.0, -1.0)))
        return out


def tasks(k: int, need: int | None = None) -> list[Task]:
    """Toy tasks; by default every third one is easy (one good move wins), the rest hard (three)."""
    return [
        Task(
            task_id=f"t{i}",
            environment="toy",
            family="toy",
            split="train",
            prompt="p",
            spec={"need": need if need is not None else (3 if i % 3 else 1)},
        )
        for i in range(k)
    ]


def engine_for(name: str, counts: Counts, refit_every: int = 4, **cfg) -> RolloutEngine:
    rail = RailConfig(
        entropy_warmup=2, refit_every=refit_every, min_fit_traces=4, heuristic_quantile=0.5, seed=1
    )
    config = AllocatorConfig(seed=1, rail_base_group=2, rail=rail, **cfg)
    return RolloutEngine(lambda: ToyEnv(counts), make_allocator(name, config), max_steps=LENGTH, workers=2)


def live_engine(counts: Counts, name: str = "rail-8") -> RolloutEngine:
    """A live controller predicting a gain of 1 for every arm, never refit: only the budget stops it."""
    engine = engine_for(name, counts, refit_every=10_000)
    ctl = engine.allocator.controller
    ctl.mode = "live"
    theta = np.zeros((1 + len(ctl.model.arms)) * (CONTEXT_DIM + 1))
    theta[CONTEXT_DIM] = 1.0
    ctl.model.load_state_dict({"theta": theta.tolist()})
    return engine


METHODS = ["uniform-4", "dapo-4", "arpo-8", "tree-6", "vip-4", "rail-8", "rail-live-8"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("total", [5, 40])
def test_ledger_sums_to_what_was_run_and_budgets_hold(method: str, total: int) -> None:
    counts = Counts()
    engine = live_engine(counts) if "live" in method else engine_for(method, counts)
    ledger, budgets, groups = Budget(), [], []
    for seed in range(3 if "rail" in method else 1):  # later batches see the controller's traces
        budgets.append(RolloutBudget(total))
        batch = engine.collect(
            ToyPolicy(counts), tasks(4), budgets[-1], seed=seed, policy_version="v0", ledger=ledger
        )
        groups += batch.groups
    run = [e for g in groups for e in (*g.discarded, *g.episodes)]
    own_steps = sum(len(e.trajectory) - (e.branch_of.step if e.branch_of else 0) for e in run)
    assert ledger.rollouts == len(run) == counts.resets + counts.restores == sum(b.spent for b in budgets)
    assert all(b.spent <= total for b in budgets)
    assert ledger.branches == sum(e.branch_of is not None for e in run) == counts.restores
    assert ledger.env_steps == own_steps == counts.steps
    assert (ledger.policy_forwards, ledger.candidates_scored) == (counts.acts, counts.scored)
    assert ledger.discarded == sum(len(g.discarded) + (0 if g.keep else len(g.episodes)) for g in groups)
    assert ledger.wall_s > 0
    cap = engine.allocator.group_plan("t").cap
    assert all(len(g.episodes) + len(g.discarded) <= cap for g in groups)
    if "live" in method and total == 40:
        assert [len(g.episodes) for g in groups[:4]] == [8, 8, 8, 8]  # branched until each group's cap


def test_branches_share_the_parents_prefix_and_continue_from_the_restored_state() -> None:
    counts = Counts()
    engine = live_engine(counts)
    batch = engine.collect(ToyPolicy(counts), tasks(3), RolloutBudget(24), seed=0, policy_version="v0")
    episodes = batch.all_episodes()
    by_id = {e.episode_id: e for e in episodes}
    branched = [e for e in episodes if e.branch_of is not None]
    assert branched and all(1 <= e.branch_of.step < LENGTH for e in branched)
    for e in branched:
        parent, k = by_id[e.branch_of.episode_id], e.branch_of.step
        assert [s.observation for s in e.trajectory[: k + 1]] == [
            s.observation for s in parent.trajectory[: k + 1]
        ]
        assert [s.action for s in e.trajectory[:k]] == [s.action for s in parent.trajectory[:k]]
        actions = [s.action for s in e.trajectory]
        for t in range(k + 1, len(e.trajectory)):  # the env's own observations after the restore
            assert e.trajectory[t].observation.text == "history: " + ",".join(actions[:t])
        assert e.task_id == parent.task_id and e.decoding_regime.name in {"default", "hot", "cool"}


def test_a_greedy_branch_replays_its_parent_exactly() -> None:
    greedy = DecodingRegime(name="greedy", temperature=1e-3)
    counts = Counts()
    engine = engine_for("tree-3", counts)  # one chain, two expansions under the group's regime
    batch = engine.collect(
        ToyPolicy(counts), tasks(1), RolloutBudget(3), seed=0, policy_version="v0", regime=greedy
    )
    (group,) = batch.groups
    first, *forks = group.episodes
    assert len(forks) == 2 and all(f.branch_of.episode_id == first.episode_id for f in forks)
    for fork in forks:
        assert [s.observation for s in fork.trajectory] == [s.observation for s in first.trajectory]
        assert fork.outcome == first.outcome


def test_realized_gains_are_the_variance_change_the_branches_made() -> None:
    counts = Counts()
    engine = live_engine(counts)
    batch = engine.collect(ToyPolicy(counts), tasks(3), RolloutBudget(24), seed=5, policy_version="v0")
    traced = [s.y for s in engine.allocator.controller._buffer]
    # Groups decide concurrently (one plan each per round), so the controller sees their gains interleaved.
    assert sorted(traced) == sorted(y for g in batch.groups for y in g.gains) and len(traced) >= 3
    for group in batch.groups:
        # A plan's branches arrive together (same fork point) right after the members it saw.
        rewards, forks = [e.reward for e in group.episodes], [e.branch_of for e in group.episodes]
        cuts = [2] + [i for i in range(3, len(forks)) if forks[i] != forks[i - 1]] + [len(forks)]
        expected = [
            reward_variance(rewards[:b]) - reward_variance(rewards[:a]) for a, b in zip(cuts, cuts[1:])
        ]
        assert group.gains == pytest.approx(expected)


def test_stored_traces_keep_the_rewards_behind_each_gain(tmp_path) -> None:
    counts = Counts()
    engine = live_engine(counts)
    store = RailTraceStore(tmp_path / "control.db")
    engine.allocator.store = store
    batch = engine.collect(ToyPolicy(counts), tasks(3), RolloutBudget(24), seed=5, policy_version="v0")
    traces = store.all()
    assert len(traces) == engine.allocator.controller.n_traces >= 3
    by_id = {e.episode_id: e for g in batch.groups for e in g.episodes}
    for trace in traces:
        assert trace.y == pytest.approx(realized_gain(trace.base_rewards, trace.branch_rewards))
        (group,) = [g for g in batch.groups if g.group_id == trace.group_id]
        rewards = [e.reward for e in group.episodes]
        n, m = len(trace.base_rewards), len(trace.branch_rewards)
        assert list(trace.base_rewards) == rewards[:n] and list(trace.branch_rewards) == rewards[n : n + m]
        parent = by_id[group.episodes[n].branch_of.episode_id]
        assert trace.parent_reward == parent.reward and group.episodes[n].branch_of.step == trace.step
    store.close()


def test_groups_train_together_and_dapo_replaces_zero_variance_groups() -> None:
    counts = Counts()
    engine = engine_for("dapo-3", counts, dapo_max_resamples=2)
    everyone_wins = tasks(2, need=0)
    batch = engine.collect(ToyPolicy(counts), everyone_wins, RolloutBudget(100), seed=0, policy_version="v0")
    assert [len(g.discarded) for g in batch.groups] == [6, 6] and not any(g.keep for g in batch.groups)
    assert batch.zero_variance_share == 1.0 and batch.training_batch() == ([], [])
    assert batch.ledger.rollouts == 18 and batch.ledger.discarded == 18
    counts = Counts()
    mixed = engine_for("arpo-6", counts).collect(
        ToyPolicy(counts), tasks(3), RolloutBudget(100), seed=2, policy_version="v0"
    )
    episodes, index = mixed.training_batch()
    assert Counter(index) == Counter({0: 6, 1: 6, 2: 6})  # ARPO tops every group up to N
    assert [e.task_id for e in episodes] == [f"t{i}" for i in index]


def test_run_group_counts_one_batched_forward_per_step() -> None:
    ledger, counts = Budget(), Counts()
    direct = run_group(
        lambda: ToyEnv(counts),
        tasks(1)[0],
        ToyPolicy(counts),
        size=3,
        seed=9,
        policy_version="v0",
        budget=ledger,
    )
    assert len(direct) == 3 and all(e.branch_of is None for e in direct)
    assert (ledger.rollouts, ledger.branches, ledger.env_steps) == (3, 0, 3 * LENGTH) and counts.resets == 3
    assert ledger.policy_forwards == counts.acts == LENGTH
    assert [e.seed for e in direct] == [9, 10, 11]


def test_the_ledger_counts_the_actions_the_environment_refused() -> None:
    class Refusing(ToyEnv):  # "bad" is refused, as an environment marks an action it cannot take
        def step(self, action: str) -> StepResult:
            return super().step(action).model_copy(update={"info": {"invalid_action": action == "bad"}})

    ledger, counts = Budget(), Counts()
    episodes = run_group(lambda: Refusing(counts), tasks(1)[0], ToyPolicy(counts), size=3, seed=2,
                         policy_version="v0", budget=ledger)
    refused = sum(s.action == "bad" for e in episodes for s in e.trajectory)
    assert 0 < refused < 3 * LENGTH
    assert ledger.invalid_actions == refused and ledger.metrics()["rollout/invalid_actions"] == refused
    assert Budget.from_state_dict({"rollouts": 2}).invalid_actions == 0  # a ledger stored before it


def test_live_decisions_are_counted_per_arm() -> None:
    counts = Counts()
    engine = live_engine(counts)
    engine.collect(ToyPolicy(counts), tasks(3), RolloutBudget(24), seed=1, policy_version="v0")
    d = engine.allocator.metrics()
    shares = {k.rsplit("/", 1)[1]: v for k, v in d.items() if k.startswith("rail/live_arm_share/")}
    assert d["rail/live_decisions"] == d["rail/decisions"] > 0 and sum(shares.values()) == pytest.approx(1)
    plans = round(d["rail/live_decisions"] * (1 - shares["none"]))
    assert plans == engine.allocator.controller.n_traces > 0  # every live branching decision was realized


def test_finalize_charges_the_invalid_action_penalty_per_flagged_step() -> None:
    task = Task(environment="toy", task_id="t0", family="toy", split="train", prompt="p", spec={})
    steps = [Step(observation=Observation(text="o"), action=a, logprob=0.0, entropy=0.0,
                  info={"invalid_action": a == "garbage"}) for a in ("garbage", "ok", "garbage")]
    episode = Episode(environment="toy", task_id="t0", trajectory=steps, outcome="failure", reward=0.0,
                      env_reward=0.0, policy_version="v0")
    fused = finalize(episode, task, None, RewardConfig(invalid_action_penalty=0.25))
    assert fused.reward == pytest.approx(-1.5) and fused.reward_components.step_penalty == pytest.approx(0.5)
    assert finalize(episode, task, None, RewardConfig(invalid_action_penalty=0.0)).reward == -1.0


def test_distinct_first_gives_each_group_different_first_moves_and_leaves_the_rest_free() -> None:
    counts = Counts()
    engine = RolloutEngine(lambda: ToyEnv(counts), make_allocator("uniform-3"), max_steps=LENGTH,
                           distinct="first")
    later_repeats = 0
    for seed in range(8):
        batch = engine.collect(UniformPolicy(), tasks(2), RolloutBudget(6), seed=seed, policy_version="v0")
        for group in batch.groups:
            assert sorted(e.trajectory[0].action for e in group.episodes) == sorted(MOVES)  # 3 moves, 3 rollouts
            later_repeats += len({e.trajectory[1].action for e in group.episodes}) < 3
    assert later_repeats > 0  # only the first action is drawn without replacement
    plain = RolloutEngine(lambda: ToyEnv(counts), make_allocator("uniform-3"), max_steps=LENGTH)
    first_repeats = sum(
        len({e.trajectory[0].action for e in g.episodes}) < 3
        for seed in range(8)
        for g in plain.collect(UniformPolicy(), tasks(2), RolloutBudget(6), seed=seed, policy_version="v0").groups
    )
    assert first_repeats > 0  # without it the same seeds repeat first moves, so the check above can fail


class LoopEnv(ToyEnv):
    """The toy game whose observation shows only how many moves are left to make and a state key that
    recurs: every "idle" returns to the opening state, as `revert` does in the shell."""

    def _obs(self) -> Observation:
        opening = not self.history or self.history[-1] == "idle"
        return Observation(text=f"{LENGTH - len(self.history)} left", candidates=LOOP_MOVES,
                           features={"step": float(len(self.history))},
                           state_key="opening" if opening else f"after {self.history[-1]}")


LOOP_MOVES = ["good", "bad", "idle", "g2", "g3", "g4", "g5", "g6"]


class Preferring(UniformPolicy):
    """A sharp policy: 0.9 on "idle", the rest spread; honours ``distinct`` and ``drawn``."""

    def act(self, observations, environments, regime, generator=None, distinct=None, drawn=None):
        rows = [torch.tensor([0.9 if c == "idle" else 0.1 / (len(o.candidates) - 1) for c in o.candidates])
                for o in observations]
        picks = draw_indices(rows, [o.candidates for o in observations], distinct, generator, drawn)
        return [ActionSample(o.candidates[j], j, math.log(float(r[j])), 1.0, 0.0)
                for o, r, j in zip(observations, rows, picks)]


def opening_draws(distinct: str, seed: int) -> list[list[str]]:
    engine = RolloutEngine(lambda: LoopEnv(Counts()), make_allocator("uniform-2"), max_steps=LENGTH,
                           distinct=distinct)
    batch = engine.collect(Preferring(), tasks(1), RolloutBudget(2), seed=seed, policy_version="v0")
    return [[s.action for e in g.episodes for s in e.trajectory if s.observation.state_key == "opening"]
            for g in batch.groups]


def test_distinct_states_never_draws_an_action_twice_from_a_state_the_group_shares() -> None:
    shared = 0
    for seed in range(10):
        for actions in opening_draws("states", seed):
            shared += len(actions) > 2
            assert len(actions) == len(set(actions))  # 8 moves: none runs out within 2 rollouts x 4 steps
    assert shared > 0  # the opening state recurs within and across the group's episodes
    assert all(len(a) > len(set(a)) for seed in range(10) for a in opening_draws("first", seed))  # repeats
    with pytest.raises(ConfigError, match="choose one of off, first, states"):
        opening_draws("every", 0)


def test_rail_context_reads_each_step_by_how_its_action_was_chosen() -> None:
    from aios_rl.rollout.engine import _action_logprob, _normalized_entropy

    four = Observation(text="o", candidates=["a", "b", "c", "d"])
    two = Observation(text="o", candidates=["a", "b"])
    tokens = [-0.5, -1.0, -1.5]  # a 3-token answer
    # a candidate chosen by scoring its answer (LM score mode): the candidate's probability, normalised over
    # the candidates, is not the product of its token probabilities
    scored = Step(observation=four, action="a", logprob=math.log(0.1), entropy=0.7, token_ids=[1, 2, 3],
                  token_logprobs=tokens, loss_mask=[1, 1, 1])
    written = Step(observation=four, action='{"action": "a"}', logprob=sum(tokens), entropy=2.0,
                   token_ids=[1, 2, 3], token_logprobs=tokens, loss_mask=[1, 1, 1])
    chosen = Step(observation=two, action="b", logprob=math.log(0.25), entropy=0.5)  # the compact student
    assert math.exp(_action_logprob(scored)) == pytest.approx(0.1)
    assert _action_logprob(written) == pytest.approx(-1.0)  # per token
    assert math.exp(_action_logprob(chosen)) == pytest.approx(0.25)
    assert _normalized_entropy(scored, math.log(1000)) == pytest.approx(0.7 / math.log(4))
    assert _normalized_entropy(written, math.log(1000)) == pytest.approx(2.0 / math.log(1000))
    assert _normalized_entropy(chosen, None) == pytest.approx(0.5 / math.log(2))  # its own step's size


def test_arpo_branches_sample_under_the_groups_own_regime() -> None:
    # ARPO's branches are ordinary training rollouts of the group: a configured temperature/top-p (the
    # campaign's "train" regime) applies to them as to the group's fresh rollouts and top-ups.
    counts = Counts()
    engine = engine_for("arpo-8", counts, arpo_branch_probability=1.0)
    train = DecodingRegime(name="train", temperature=0.5, top_p=0.9)
    batch = engine.collect(ToyPolicy(counts), tasks(2), RolloutBudget(16), seed=0, policy_version="v0",
                           regime=train)
    episodes = batch.all_episodes()
    assert any(e.branch_of is not None for e in episodes)
    assert all(e.decoding_regime == train for e in episodes)


class ScoringLM(ToyPolicy):
    """An LM in score mode: it picks a candidate (``index`` set) and reports the chosen answer's tokens."""

    def act(self, observations, environments, regime, generator=None):
        out = super().act(observations, environments, regime, generator)
        return [ActionSample(s.action, s.index, s.logprob, s.entropy, 0.0, s.hidden, token_ids=(7, 8, 9),
                             token_logprobs=(-0.1, -0.2, -0.3), loss_mask=(1, 1, 1)) for s in out]


class WritingLM(ToyPolicy):
    """An LM in generate mode: it writes its action (``index`` None) and never scores the candidates."""

    def act(self, observations, environments, regime, generator=None):
        out = super().act(observations, environments, regime, generator)
        return [ActionSample(s.action, None, -0.6, s.entropy, 0.0, s.hidden, token_ids=(7, 8),
                             token_logprobs=(-0.1, -0.5), loss_mask=(1, 1)) for s in out]


def test_the_ledger_counts_scored_candidates_and_written_tokens_only_where_they_happened() -> None:
    for policy, scored, written in [(ScoringLM, True, False), (WritingLM, False, True)]:
        ledger, counts = Budget(), Counts()
        run_group(lambda counts=counts: ToyEnv(counts), tasks(1)[0], policy(counts), size=2, seed=0,
                  policy_version="v0", budget=ledger)
        steps = 2 * LENGTH  # every observation offers the 3 moves
        assert ledger.candidates_scored == (3 * steps if scored else 0), policy.__name__
        assert ledger.tokens_generated == (2 * steps if written else 0), policy.__name__


def test_environments_built_before_one_that_fails_are_closed() -> None:
    counts, closed, built = Counts(), [], []

    class Closing(ToyEnv):
        def close(self) -> None:
            closed.append(self)

    def make_env() -> ToyEnv:
        if len(built) == 2:
            raise RuntimeError("no room for a third work directory")
        built.append(Closing(counts))
        return built[-1]

    with pytest.raises(RuntimeError, match="third"):
        run_group(make_env, tasks(1)[0], ToyPolicy(counts), size=3, seed=0, policy_version="v0")
    assert closed == built and len(built) == 2


def test_the_ledgers_wall_time_includes_the_allocators_decisions_and_the_teacher() -> None:
    # Methods compare at equal cost, so what a method itself spends (RAIL's controller refits inside
    # record_gain) and the teacher's critique of every rollout count in rollout/wall_s too.
    import time

    from aios_rl.contracts.episode import TeacherSignal

    pause = 0.05
    counts = Counts()
    engine = live_engine(counts)
    allocator, record_gain = engine.allocator, engine.allocator.record_gain
    slow: list[float] = []

    def slow_record_gain(*args):
        time.sleep(pause)
        slow.append(pause)
        return record_gain(*args)

    allocator.record_gain = slow_record_gain
    ledger = Budget()
    engine.collect(ToyPolicy(counts), tasks(2), RolloutBudget(16), seed=0, policy_version="v0", ledger=ledger)
    assert len(slow) >= 4 and ledger.wall_s >= sum(slow)

    class SlowTeacher:
        def signal(self, task, episode):
            time.sleep(pause)
            return TeacherSignal(status="complete", backend="slow")

    ledger = Budget()
    run_group(lambda: ToyEnv(Counts()), tasks(1)[0], ToyPolicy(Counts()), size=4, seed=0, policy_version="v0",
              teacher=SlowTeacher(), budget=ledger)
    assert ledger.wall_s >= 4 * pause


def test_named_episodes_get_their_ids_in_arrival_order_and_branches_name_their_named_parents() -> None:
    """With ``name`` the same batch run twice gives its episodes the same ids: what lets an epoch run again
    after a kill find the episodes its first attempt stored."""

    def name(task: Task, index: int) -> str:
        return f"{task.task_id}/{index}"

    def run() -> list[Episode]:
        counts = Counts()
        batch = live_engine(counts).collect(ToyPolicy(counts), tasks(3), RolloutBudget(24), seed=0,
                                            policy_version="v0", name=name)
        return batch.all_episodes()

    first, again = run(), run()
    assert [e.episode_id for e in first] == [e.episode_id for e in again]
    by_task: dict[str, list[str]] = {}
    for e in first:
        by_task.setdefault(e.task_id, []).append(e.episode_id)
    assert all(sorted(ids, key=lambda i: int(i.split("/")[1])) == [f"{t}/{k}" for k in range(len(ids))]
               for t, ids in by_task.items())
    branched = [e for e in first if e.branch_of is not None]
    assert branched and all(e.branch_of.episode_id in {p.episode_id for p in first} for e in branched)
    counts = Counts()
    dapo = engine_for("dapo-3", counts, dapo_max_resamples=2).collect(
        ToyPolicy(counts), tasks(2, need=0), RolloutBudget(100), seed=0, policy_version="v0", name=name
    )
    assert [e.episode_id for e in dapo.groups[0].discarded] == [f"t0/{k}" for k in range(6)]
