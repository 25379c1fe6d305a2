"""Self-imitation: loop cutting, the success archive, and the targets it yields."""

from __future__ import annotations

import random

import pytest

from aios_rl.algos.self_imitation import loop_free_steps, pick_archived, self_imitation_batch, update_archive
from aios_rl.contracts.episode import Episode, Observation, Step

CANDIDATES = ["patch a", "patch b", "revert", "run tests"]


def step(state: str | None, action: str, n: int) -> Step:
    obs = Observation(text=f"step {n}: state {state}", candidates=CANDIDATES, state_key=state)
    return Step(observation=obs, action=action, logprob=-1.0, entropy=1.0)


def episode(task: str, path: list[tuple[str | None, str]], outcome: str = "success", eid: str | None = None) -> Episode:
    trajectory = [step(state, action, n) for n, (state, action) in enumerate(path)]
    extra = {"episode_id": eid} if eid else {}
    return Episode(environment="shell", task_id=task, trajectory=trajectory, outcome=outcome, reward=1.0,
                   env_reward=1.0, policy_version="ckpt-0000", **extra)


def test_a_revisited_state_cuts_the_detour_taken_since_its_first_visit() -> None:
    # A --patch b--> B --revert--> A --patch a--> C --run tests--> (success)
    steps = [step("A", "patch b", 0), step("B", "revert", 1), step("A", "patch a", 2), step("C", "run tests", 3)]
    kept = loop_free_steps(steps)
    assert [s.action for s in kept] == ["patch a", "run tests"]
    assert kept[0] is steps[2]


def test_nested_and_repeated_loops_leave_a_path_without_repeated_states() -> None:
    path = [("A", "patch b"), ("B", "run tests"), ("D", "revert"), ("A", "patch b"), ("B", "revert"),
            ("A", "patch a"), ("C", "run tests")]
    kept = loop_free_steps([step(s, a, n) for n, (s, a) in enumerate(path)])
    assert [(s.observation.state_key, s.action) for s in kept] == [("A", "patch a"), ("C", "run tests")]


def test_random_walks_match_a_plain_rebuild_of_the_path() -> None:
    def reference(steps: list[Step]) -> list[Step]:  # cut, then look the states up again from scratch
        path: list[Step] = []
        for s in steps:
            states = [p.observation.state_key for p in path]
            if s.observation.state_key in states:
                del path[states.index(s.observation.state_key):]
            path.append(s)
        return path

    for seed in range(300):
        rng = random.Random(seed)
        steps = [step(rng.choice("ABCDE"), rng.choice(CANDIDATES), n) for n in range(rng.randrange(1, 25))]
        kept = loop_free_steps(steps)
        assert kept == reference(steps)
        assert len({s.observation.state_key for s in kept}) == len(kept)


def test_without_state_keys_nothing_is_cut_when_texts_differ() -> None:
    steps = [step(None, "patch b", 0), step(None, "revert", 1), step(None, "patch a", 2)]
    assert loop_free_steps(steps) == steps


def test_the_archive_keeps_the_shortest_success_and_the_newest_on_ties() -> None:
    long = episode("t1", [("A", "patch b"), ("B", "run tests"), ("E", "patch a"), ("F", "run tests")], eid="long")
    short = episode("t1", [("A", "patch a"), ("C", "run tests")], eid="short")
    tie = episode("t1", [("A", "patch a"), ("C", "run tests")], eid="tie")
    failed = episode("t2", [("A", "patch b")], outcome="failure", eid="failed")
    archive = update_archive({}, [long, failed])
    assert archive == {"t1": {"episode_id": "long", "steps": 4}}
    archive = update_archive(archive, [short])
    assert archive["t1"] == {"episode_id": "short", "steps": 2}
    assert update_archive(archive, [tie])["t1"]["episode_id"] == "tie"
    assert update_archive(archive, [long])["t1"]["episode_id"] == "short"
    assert "t2" not in update_archive(archive, [failed])


def test_the_loop_cut_length_decides_not_the_raw_length() -> None:
    detour = episode("t1", [("A", "patch b"), ("B", "revert"), ("A", "patch a"), ("C", "run tests")], eid="detour")
    direct = episode("t1", [("A", "patch a"), ("C", "run tests"), ("C2", "run tests")], eid="direct")
    assert update_archive({}, [direct, detour])["t1"] == {"episode_id": "detour", "steps": 2}


def test_targets_are_the_kept_actions_of_successes_only() -> None:
    ok = episode("t1", [("A", "patch b"), ("B", "revert"), ("A", "patch a"), ("C", "run tests")])
    bad = episode("t2", [("A", "patch b")], outcome="failure")
    batch = self_imitation_batch([ok, bad], weight=0.5)
    assert batch.targets == ("patch a", "run tests")
    assert [o.state_key for o in batch.observations] == ["A", "C"]
    assert batch.environments == ("shell", "shell")
    assert batch.weights.tolist() == pytest.approx([0.5, 0.5])


def test_written_answers_are_targets_and_off_candidate_choices_are_not() -> None:
    written = step("A", '{"action": "patch a"}', 0).model_copy(update={"token_ids": [5, 6, 7]})
    stray = step("C", "not a candidate", 1)  # a candidate scorer could never have chosen it
    ok = Episode(environment="shell", task_id="t1", trajectory=[written, stray], outcome="success", reward=1.0,
                 env_reward=1.0, policy_version="ckpt-0000")
    assert self_imitation_batch([ok], weight=1.0).targets == ('{"action": "patch a"}',)


def test_the_archive_is_imitated_whole_up_to_the_limit_then_a_drawn_subset() -> None:
    archive = {f"t{i}": {"episode_id": f"e{i}", "steps": 1} for i in range(5)}
    assert pick_archived(archive, 5, random.Random(0)) == ["e0", "e1", "e2", "e3", "e4"]
    drawn = pick_archived(archive, 2, random.Random(0))
    assert len(drawn) == 2 and set(drawn) <= {f"e{i}" for i in range(5)}
    assert drawn == pick_archived(dict(reversed(list(archive.items()))), 2, random.Random(0))
