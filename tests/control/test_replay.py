"""Replay lanes: routing table and properties, capacity eviction, idempotent add, sampling, JSON."""

from __future__ import annotations

import logging
from itertools import product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from aios_rl.contracts.config import load_config
from aios_rl.contracts.episode import LANES, Comparison, Episode, TeacherSignal
from aios_rl.contracts.errors import ConfigError, ContractError
from aios_rl.control import replay
from aios_rl.control.replay import LaneEntry, ReplayConfig, ReplayPool, route, route_episode

OUTCOMES = ["better", "same", "worse", None]
STATUSES = ["completed", "comparison_failed", None]

# (boundary, relative_outcome, comparison_status, lane): every branch of the first-match rule.
ROUTE_TABLE = [
    (True, "worse", "completed", "diagnostic_only"),
    (True, "better", "completed", "diagnostic_only"),
    (True, None, "comparison_failed", "diagnostic_only"),
    (True, None, None, "diagnostic_only"),
    (False, "worse", "completed", "negative"),
    (False, "better", "completed", "positive"),
    (False, "same", "completed", "neutral"),
    (False, None, "comparison_failed", "neutral"),
    (False, None, None, "neutral"),
    # A failed comparison's outcome is untrusted, even if one was (inconsistently) given.
    (False, "worse", "comparison_failed", "neutral"),
    (False, "better", "comparison_failed", "neutral"),
    # No status known: the outcome is trusted.
    (False, "worse", None, "negative"),
    (False, "better", None, "positive"),
]


@pytest.mark.parametrize(("boundary", "outcome", "status", "lane"), ROUTE_TABLE)
def test_route_table(boundary: bool, outcome: str | None, status: str | None, lane: str) -> None:
    assert route(boundary=boundary, relative_outcome=outcome, comparison_status=status) == lane


@settings(max_examples=100, deadline=None)
@given(st.booleans(), st.sampled_from(OUTCOMES), st.sampled_from(STATUSES))
def test_route_total_and_deterministic(boundary: bool, outcome: str | None, status: str | None) -> None:
    lanes = {route(boundary=boundary, relative_outcome=outcome, comparison_status=status) for _ in range(3)}
    assert len(lanes) == 1
    (lane,) = lanes
    assert lane in LANES
    # diagnostic_only comes from the boundary flag and from nothing else.
    assert (lane == "diagnostic_only") == boundary


def test_route_covers_every_combination_once() -> None:
    seen = {
        (b, o, s): route(boundary=b, relative_outcome=o, comparison_status=s)
        for b, o, s in product([True, False], OUTCOMES, STATUSES)
    }
    assert len(seen) == 24 and set(seen.values()) == set(LANES)


def episode(boundary: bool | None, outcome: str | None, status: str = "completed") -> Episode:
    signal = None
    if boundary is not None:
        signal = TeacherSignal(status="complete", backend="oracle", boundary=boundary)
    comparison = None if outcome is None else Comparison(status=status, relative_outcome=outcome)
    return Episode(
        environment="shell",
        task_id="t1",
        trajectory=[],
        outcome="success",
        reward=1.0,
        env_reward=1.0,
        policy_version="ck",
        teacher_signal=signal,
        comparison=comparison,
    )


@pytest.mark.parametrize(
    ("boundary", "outcome", "rollback", "lane"),
    [
        (True, "worse", False, "diagnostic_only"),
        (True, "better", True, "diagnostic_only"),
        (False, "better", True, "negative"),
        (None, "same", True, "negative"),
        (False, "worse", False, "negative"),
        (None, "better", False, "positive"),
        (False, "same", False, "neutral"),
        (None, None, False, "neutral"),
    ],
)
def test_route_episode(boundary: bool | None, outcome: str | None, rollback: bool, lane: str) -> None:
    assert route_episode(episode(boundary, outcome), rollback_batch=rollback) == lane


def test_route_episode_failed_comparison_is_neutral() -> None:
    failed = episode(False, None).model_copy(update={"comparison": Comparison(status="comparison_failed")})
    assert route_episode(failed) == "neutral"


def test_replay_config() -> None:
    cfg = ReplayConfig()
    assert [cfg.capacity(lane) for lane in LANES] == [512, 512, 256, 256]
    assert cfg.quotas() == {"positive": 8, "neutral": 4, "negative": 4, "diagnostic_only": 0}
    assert all(f.description for f in ReplayConfig.model_fields.values())
    with pytest.raises(ConfigError, match="never trained on"):
        ReplayConfig(diagnostic_only_quota=1)
    with pytest.raises(ConfigError, match="never trained on"):
        load_config(ReplayConfig, overrides={"diagnostic_only_quota": 2})
    with pytest.raises(ConfigError, match="did you mean 'negative_quota'"):
        load_config(ReplayConfig, overrides={"negativ_quota": 2})
    with pytest.raises(ConfigError):
        load_config(ReplayConfig, overrides={"positive_capacity": 0})


def entry(episode_id: str, lane: str = "positive", environment: str = "shell", epoch: int = 1) -> LaneEntry:
    return LaneEntry(episode_id=episode_id, lane=lane, environment=environment, epoch=epoch, task_id="t")


def fill(pool: ReplayPool, entries: list[LaneEntry], config: ReplayConfig | None = None) -> ReplayPool:
    for e in entries:
        pool = pool.add(e, config)
    return pool


def ids(pool: ReplayPool, lane: str | None = None) -> list[str]:
    return [e.episode_id for e in pool.query(lane=lane)]


def test_capacity_evicts_oldest_first_in_that_lane_only() -> None:
    cfg = ReplayConfig(positive_capacity=3)
    pool = fill(ReplayPool(), [entry("n0", "neutral")] + [entry(f"p{i}") for i in range(5)], cfg)
    assert ids(pool, "positive") == ["p2", "p3", "p4"]
    assert ids(pool, "neutral") == ["n0"]
    assert pool.counts() == {"positive": 3, "neutral": 1, "negative": 0, "diagnostic_only": 0}
    assert [e.seq for e in pool.query(lane="positive")] == [3, 4, 5]
    assert pool.next_seq == 6


def test_add_is_idempotent_on_episode_id() -> None:
    pool = fill(ReplayPool(), [entry("a"), entry("b", "negative")])
    assert pool.add(entry("a")) is pool
    assert pool.add(entry("a", "negative")) is pool  # same id, another lane: still a no-op
    assert ids(pool) == ["a", "b"] and pool.next_seq == 2


def test_evicted_id_can_come_back_as_new() -> None:
    cfg = ReplayConfig(positive_capacity=1)
    pool = fill(ReplayPool(), [entry("a"), entry("b"), entry("a")], cfg)
    assert ids(pool) == ["a"] and pool.query()[0].seq == 2


def test_seq_given_must_not_go_backwards() -> None:
    pool = ReplayPool().add(entry("a").model_copy(update={"seq": 10}))
    assert pool.next_seq == 11
    with pytest.raises(ContractError, match="seq"):
        pool.add(entry("b").model_copy(update={"seq": 3}))


def test_move_to_negative() -> None:
    cfg = ReplayConfig(negative_capacity=2)
    start = [entry("n1", "negative"), entry("n2", "negative"), entry("p1"), entry("p2")]
    pool = fill(ReplayPool(), start, cfg)
    moved = pool.move("p1", "negative", cfg)
    assert ids(moved, "negative") == ["n2", "p1"]  # newest in its new lane; n1 evicted
    assert ids(moved, "positive") == ["p2"]
    assert moved.move("p1", "negative", cfg) is moved
    assert moved.move("missing", "negative", cfg) is moved


def test_query_filters() -> None:
    pool = fill(
        ReplayPool(),
        [
            entry("a", "positive", "shell", 1),
            entry("b", "positive", "browser", 2),
            entry("c", "neutral", "shell", 2),
        ],
    )
    assert ids_of(pool.query(environment="shell")) == ["a", "c"]
    assert ids_of(pool.query(epoch=2)) == ["b", "c"]
    assert ids_of(pool.query(lane="positive", environment="browser", epoch=2)) == ["b"]
    assert pool.query(lane="negative") == []


def ids_of(entries: list[LaneEntry]) -> list[str]:
    return [e.episode_id for e in entries]


def big_pool() -> ReplayPool:
    lanes = ["positive"] * 40 + ["neutral"] * 3 + ["negative"] * 20 + ["diagnostic_only"] * 5
    return fill(ReplayPool(), [entry(f"e{i}", lane) for i, lane in enumerate(lanes)])


def test_sample_deterministic_and_honours_quotas() -> None:
    pool = big_pool()
    quotas = ReplayConfig().quotas()
    first = pool.sample(quotas, rng_seed=7)
    assert first == pool.sample(quotas, rng_seed=7)
    assert first != pool.sample(quotas, rng_seed=8)
    assert {lane: len(got) for lane, got in first.items()} == {
        "positive": 8,
        "neutral": 3,  # only 3 available for a quota of 4
        "negative": 4,
        "diagnostic_only": 0,
    }
    for lane, got in first.items():
        assert len(set(got)) == len(got)  # without replacement
        assert set(got) <= set(ids(pool, lane))


def test_sample_lanes_are_independent_streams() -> None:
    pool = big_pool()
    a = pool.sample({"positive": 8, "negative": 4}, rng_seed=3)
    b = pool.sample({"positive": 8, "negative": 10}, rng_seed=3)
    assert a["positive"] == b["positive"]
    assert len(b["negative"]) == 10


def test_sample_warns_on_starving_lane(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "_STARVING_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="aios_rl.control.replay"):
        big_pool().sample({"neutral": 4, "positive": 2}, rng_seed=0)
    assert "lane neutral starving" in caplog.text and "positive" not in caplog.text


def test_starving_lane_warns_once_then_logs_at_debug(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "_STARVING_WARNED", set())
    with caplog.at_level(logging.DEBUG, logger="aios_rl.control.replay"):
        for seed in range(3):
            big_pool().sample({"neutral": 4}, rng_seed=seed)
        big_pool().sample({"neutral": 4, "negative": 99}, rng_seed=0)
    ours = [r for r in caplog.records if r.name == replay.__name__]
    got = [(r.levelname, r.getMessage().split(":")[1].strip()) for r in ours]
    assert got == [
        ("WARNING", "lane neutral starving"),
        ("DEBUG", "lane neutral starving"),
        ("DEBUG", "lane neutral starving"),
        ("DEBUG", "lane neutral starving"),
        ("WARNING", "lane negative starving"),  # another lane still gets its first warning
    ]


@pytest.mark.parametrize(
    ("quotas", "seed", "match"),
    [
        ({"diagnostic_only": 1}, 0, "never trained on"),
        ({"postive": 1}, 0, "did you mean 'positive'"),
        ({"positive": -1}, 0, ">= 0"),
        ({"positive": 1}, -1, "rng_seed"),
    ],
)
def test_sample_rejects_bad_arguments(quotas: dict, seed: int, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        big_pool().sample(quotas, rng_seed=seed)


def test_json_round_trip() -> None:
    pool = big_pool()
    assert ReplayPool.model_validate(pool.model_dump(mode="json")) == pool
    restored = ReplayPool.model_validate_json(pool.model_dump_json())
    assert restored == pool
    assert restored.sample({"positive": 5}, 1) == pool.sample({"positive": 5}, 1)
    assert ReplayPool.model_validate({}) == ReplayPool()


def test_corrupt_snapshot_rejected() -> None:
    data = fill(ReplayPool(), [entry("a"), entry("b")]).model_dump(mode="json")
    dup = {**data, "entries": [data["entries"][0], {**data["entries"][1], "episode_id": "a"}]}
    with pytest.raises(ValidationError, match="duplicate"):
        ReplayPool.model_validate(dup)
    with pytest.raises(ValidationError, match="seq"):
        ReplayPool.model_validate({**data, "next_seq": 1})


@settings(max_examples=150, deadline=None)
@given(
    adds=st.lists(st.tuples(st.integers(0, 30), st.sampled_from(LANES)), max_size=120),
    caps=st.tuples(*[st.integers(1, 6)] * 4),
)
def test_pool_never_exceeds_capacity_and_matches_reference(
    adds: list[tuple[int, str]], caps: tuple[int, int, int, int]
) -> None:
    cfg = ReplayConfig(**{f"{lane}_capacity": cap for lane, cap in zip(LANES, caps, strict=True)})
    pool = ReplayPool()
    expected: dict[str, list[str]] = {lane: [] for lane in LANES}  # plain-loop reference model
    for number, lane in adds:
        episode_id = f"e{number}"
        pool = pool.add(entry(episode_id, lane), cfg)
        if not any(episode_id in members for members in expected.values()):
            expected[lane].append(episode_id)
            expected[lane] = expected[lane][-cfg.capacity(lane) :]
        assert all(pool.counts()[ln] <= cfg.capacity(ln) for ln in LANES)
    assert {lane: ids(pool, lane) for lane in LANES} == expected
    # The reduced pool survives its own validation (what a snapshot reload runs).
    assert ReplayPool.model_validate(pool.model_dump(mode="json")) == pool
