"""`aios-rl validate episode`: exit 0 for a valid episode, 2 with one line per problem otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aios_rl.cli.main import app
from aios_rl.contracts.episode import Episode, Observation, Step
from aios_rl.contracts.errors import ContractError
from aios_rl.contracts.validate import parse_json_record

runner = CliRunner()


def valid_episode() -> dict:
    step = Step(observation=Observation(text="obs", candidates=["a", "b"]), action="a", logprob=-0.5, entropy=0.6)
    episode = Episode(
        environment="shell",
        task_id="t-1",
        trajectory=[step],
        outcome="success",
        reward=1.0,
        env_reward=1.0,
        policy_version="ckpt-0",
    )
    return json.loads(episode.model_dump_json())


def run_validate(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    path = tmp_path / "episode.json"
    path.write_text(text)
    result = runner.invoke(app, ["validate", "episode", str(path)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    return result.exit_code, lines


def test_valid_episode_exits_zero(tmp_path: Path) -> None:
    code, lines = run_validate(tmp_path, json.dumps(valid_episode()))
    assert code == 0
    assert "valid Episode" in lines[-1]


def test_truncated_json(tmp_path: Path) -> None:
    text = json.dumps(valid_episode())
    code, lines = run_validate(tmp_path, text[: len(text) // 2])
    assert code == 2
    assert len(lines) == 1 and "malformed JSON at line 1" in lines[0]


def test_missing_field(tmp_path: Path) -> None:
    data = valid_episode()
    del data["outcome"]
    code, lines = run_validate(tmp_path, json.dumps(data))
    assert code == 2
    assert lines == ["outcome: got nothing; expected a value (the field is required)"]


def test_extra_field(tmp_path: Path) -> None:
    data = valid_episode() | {"surprise": 42}
    code, lines = run_validate(tmp_path, json.dumps(data))
    assert code == 2
    assert lines == ["surprise: got 42; expected no such field (unknown fields are not allowed)"]


def test_wrong_enum_value(tmp_path: Path) -> None:
    data = valid_episode() | {"outcome": "victory"}
    code, lines = run_validate(tmp_path, json.dumps(data))
    assert code == 2
    assert len(lines) == 1
    assert lines[0].startswith('outcome: got "victory"; expected input should be')
    assert "'success'" in lines[0] and "'blocked'" in lines[0]


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_reward(tmp_path: Path, token: str) -> None:
    text = json.dumps(valid_episode()).replace('"reward": 1.0', f'"reward": {token}')
    assert token in text
    code, lines = run_validate(tmp_path, text)
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("reward: got ") and lines[0].endswith("expected a finite number")


def test_non_finite_step_reward_names_the_path(tmp_path: Path) -> None:
    data = valid_episode()
    text = json.dumps(data).replace('"reward": 0.0', '"reward": NaN')
    code, lines = run_validate(tmp_path, text)
    assert code == 2
    assert lines == ["trajectory.0.reward: got nan; expected a finite number"]


def test_step_list_not_a_list(tmp_path: Path) -> None:
    data = valid_episode() | {"trajectory": {"0": "step"}}
    code, lines = run_validate(tmp_path, json.dumps(data))
    assert code == 2
    assert lines == ['trajectory: got {"0": "step"}; expected input should be a valid list']


def test_several_problems_one_line_each(tmp_path: Path) -> None:
    data = valid_episode() | {"outcome": "victory", "extra": 1}
    del data["task_id"]
    code, lines = run_validate(tmp_path, json.dumps(data))
    assert code == 2
    assert sorted(line.split(":")[0] for line in lines) == ["extra", "outcome", "task_id"]


def test_missing_file_exits_two(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", "episode", str(tmp_path / "nope.json")])
    assert result.exit_code == 2


def test_parse_json_record_raises_contract_error() -> None:
    with pytest.raises(ContractError) as info:
        parse_json_record(Episode, "{}")
    assert len(info.value.problems) >= 5


@pytest.mark.parametrize("name", ["episode", "task", "teacher-signal", "comparison"])
def test_schema_command_prints_json_schema(name: str) -> None:
    result = runner.invoke(app, ["schema", name])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert schema["additionalProperties"] is False
    assert "schema_version" in schema["properties"]


def test_episode_round_trips_through_json() -> None:
    data = valid_episode()
    assert json.loads(Episode.model_validate(data).model_dump_json()) == data


def test_non_utf8_file_exits_two_with_a_message(tmp_path: Path) -> None:
    path = tmp_path / "episode.json"
    path.write_bytes(b"\xff\xfe" + json.dumps(valid_episode()).encode("utf-16-le"))
    result = runner.invoke(app, ["validate", "episode", str(path)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "UTF-8" in result.output


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"seed": ' + "9" * 5000 + "}", "digits"),  # Python refuses to convert an integer this long
        ("[" * 100_000 + "]" * 100_000, "nested"),  # the JSON decoder runs out of stack
    ],
    ids=["huge-integer", "deep-nesting"],
)
def test_json_the_decoder_refuses_is_a_contract_error(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ContractError, match=expected):
        parse_json_record(Episode, text)
    code, lines = run_validate(tmp_path, text)
    assert code == 2 and len(lines) == 1 and expected in lines[0]


@pytest.mark.parametrize("where", ["top", "nested"])
def test_a_key_given_twice_is_refused(tmp_path: Path, where: str) -> None:
    """json.loads keeps the last of two equal keys, so a file with "reward" twice was reported valid and the
    first value silently dropped (YAML config files already refuse a key given twice)."""
    text = json.dumps(valid_episode())
    if where == "top":
        text = text.replace('"reward": 1.0', '"reward": 0.0, "reward": 1.0', 1)
    else:
        text = text.replace('"action": "a"', '"action": "b", "action": "a"', 1)
    key = "reward" if where == "top" else "action"
    with pytest.raises(ContractError, match=f"duplicate key '{key}'"):
        parse_json_record(Episode, text)
    code, lines = run_validate(tmp_path, text)
    assert code == 2 and lines == [f"<json>: got duplicate key '{key}' in one object; expected each key once "
                                   "(JSON readers keep only the last value)"]


@pytest.mark.parametrize(
    ("path", "value"),
    [(("reward",), True), (("env_reward",), False), (("trajectory", 0, "logprob"), True),
     (("trajectory", 0, "observation", "candidate_features"), [{"line_suspicion": True}])],
)
def test_a_boolean_where_a_number_belongs_is_refused(tmp_path: Path, path: tuple, value: object) -> None:
    """pydantic's lax mode read true as 1.0, so an episode with `"reward": true` was reported valid."""
    data = valid_episode()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    code, lines = run_validate(tmp_path, json.dumps(data))
    assert code == 2
    assert lines == [f"{path[0]}: got a boolean (true/false) where a number belongs; expected a number"]


def test_booleans_where_booleans_belong_still_validate(tmp_path: Path) -> None:
    data = valid_episode()
    data["trajectory"][0]["terminated"] = True
    code, lines = run_validate(tmp_path, json.dumps(data))
    assert code == 0, lines
