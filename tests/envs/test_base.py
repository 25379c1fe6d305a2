"""The environment registry and check_env, on small in-memory adapters (the shell env has its own run).

The toy adapters are the objects under test's inputs, not stand-ins for the sandbox: each variant breaks
exactly one rule check_env exists to catch, and the well-behaved one must pass.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from aios_rl.contracts.episode import Observation, StepResult, Task, Verification
from aios_rl.contracts.errors import EnvError
from aios_rl.envs import base
from aios_rl.envs.base import (
    check_env,
    find_oracle_text,
    make,
    oracle_payload_strings,
    register,
    registered,
)

SECRET = "the answer is forty-two"


class CounterEnv:
    """A correct adapter: a counter moved by ``inc``/``dec``; the task says where to stop."""

    env_id = "toy/counter-v1"
    version = "1"

    def __init__(self, start: int = 0) -> None:
        self.start = start
        self.count = start
        self.steps = 0
        self.closed = False

    def reset(self, task: Task, *, seed: int) -> Observation:
        self.count, self.steps, self.task = self.start, 0, task
        return self._obs()

    def step(self, action: str) -> StepResult:
        self.steps += 1
        invalid = action not in ("inc", "dec")
        if not invalid:
            self.count += 1 if action == "inc" else -1
        return StepResult(observation=self._obs(), reward=0.0, terminated=self.count == 3,
                          info={"invalid_action": invalid})

    def snapshot(self) -> Any:
        return (self.count, self.steps)

    def restore(self, state: Any) -> None:
        self.count, self.steps = state

    def verify(self) -> Verification:
        return Verification(completed=True, outcome="success" if self.count == 3 else "failure")

    def close(self) -> None:
        self.closed = True

    def _obs(self) -> Observation:
        cands = ["inc", "dec"]
        feats = [{"up": 1.0, "at": float(self.count)}, {"up": 0.0, "at": float(self.count)}]
        text = f"{self.task.prompt} count={self.count}"
        return Observation(text=text, candidates=cands, candidate_features=feats)


class OracleInTextEnv(CounterEnv):
    def _obs(self) -> Observation:
        obs = super()._obs()
        return obs.model_copy(update={"text": obs.text + " " + str(self.task.oracle.get("answer", ""))})


class SpecEchoEnv(CounterEnv):
    """Shows spec['hint']; a task whose spec repeats the oracle is a leak the twin run cannot see."""

    def _obs(self) -> Observation:
        obs = super()._obs()
        return obs.model_copy(update={"text": obs.text + " hint: " + self.task.spec.get("hint", "")})


class OracleInFeaturesEnv(CounterEnv):
    def _obs(self) -> Observation:
        obs = super()._obs()
        feats = [dict(f, cheat=float(bool(self.task.oracle))) for f in obs.candidate_features]
        return obs.model_copy(update={"candidate_features": feats})


class NoRestoreEnv(CounterEnv):
    def restore(self, state: Any) -> None:
        pass


class RaisesOnInvalidEnv(CounterEnv):
    def step(self, action: str) -> StepResult:
        if action not in ("inc", "dec"):
            raise EnvError(f"bad action {action!r}")
        return super().step(action)


class MisalignedEnv(CounterEnv):
    def _obs(self) -> Observation:
        return super()._obs().model_copy(update={"candidate_features": [{"up": 1.0}]})


class NanFeatureEnv(CounterEnv):
    def _obs(self) -> Observation:
        return super()._obs().model_copy(update={"features": {"x": float("nan")}})


class NotAnEnv:
    env_id = "toy/none-v1"
    version = "1"


def _task(**spec: Any) -> Task:
    return Task(task_id="t1", environment="toy", family="count", split="train", prompt="Reach three.",
                spec=spec, oracle={"answer": SECRET, "metadata": {"operator": "comparison '<' -> '<='"}})


@pytest.fixture()
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    # Registrations made by a test must not leak into the next one.
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))


def test_check_env_accepts_a_correct_adapter() -> None:
    env = CounterEnv()
    check_env(env, _task(), actions=["inc", "dec", "inc"])
    assert env.closed


@pytest.mark.parametrize(
    ("env", "check"),
    [
        (OracleInTextEnv(), "oracle_independence"),
        (OracleInFeaturesEnv(), "oracle_independence"),
        (NoRestoreEnv(), "restore"),
        (RaisesOnInvalidEnv(), "invalid_action"),
        (MisalignedEnv(), "reset"),
        (NanFeatureEnv(), "reset"),
    ],
)
def test_check_env_names_the_failed_check(env: CounterEnv, check: str) -> None:
    with pytest.raises(EnvError, match=rf"check_env\[{check}\]"):
        check_env(env, _task(), actions=["inc", "inc"])


def test_check_env_finds_oracle_text_even_when_both_runs_show_it() -> None:
    # The spec repeats the oracle (as an env reading the manifest from disk would): identical twin runs,
    # so only the literal search catches it.
    with pytest.raises(EnvError, match=r"check_env\[no_leakage\].*forty-two"):
        check_env(SpecEchoEnv(), _task(hint=SECRET), actions=["inc"])
    check_env(SpecEchoEnv(), _task(hint="count up"), actions=["inc"])


def test_check_env_rejects_non_envs() -> None:
    with pytest.raises(EnvError, match=r"check_env\[protocol\]"):
        check_env(NotAnEnv(), _task())  # type: ignore[arg-type]


def test_oracle_payload_strings_skip_names_and_keep_diff_lines() -> None:
    diff = ("--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n def f(number):\n-    if number <= 1:\n"
            "+    if number < 1:\n         return None\n")
    metadata = {"qualname": "Interval.overlaps_with", "file": "pkg/module.py", "lineno": 18,
                "description": "comparison '<' -> '<='"}
    oracle = {"reference_patch": diff, "metadata": metadata}
    payload = oracle_payload_strings(oracle)
    assert "def f(number): if number < 1: return None" in payload  # the fixed hunk, whitespace collapsed
    assert "comparison '<' -> '<='" in payload
    assert "Interval.overlaps_with" not in payload and "pkg/module.py" not in payload
    # The buggy code (what a read shows) is not oracle text; the fixed code, however indented, is.
    assert find_oracle_text(oracle, "m.py:\ndef f(number):\n    if number <= 1:\n        return None\n") is None
    assert find_oracle_text(oracle, "def f(number):\n\n  if number < 1:\n\treturn None") is not None


def test_registry_make_and_did_you_mean(clean_registry: None) -> None:
    register("toy/counter-v1", CounterEnv)
    register("toy/counter-v1", CounterEnv)  # the same factory again is harmless (re-imports)
    env = make("toy/counter-v1", start=2)
    assert isinstance(env, CounterEnv) and env.start == 2
    assert "toy/counter-v1" in registered() and registered() == sorted(registered())
    with pytest.raises(EnvError, match=r"did you mean 'toy/counter-v1'"):
        make("toy/counter-v2")


def test_make_imports_the_family_on_first_use() -> None:
    # A fresh interpreter: nothing imported aios_rl.envs.shell, so make() must import it to find the id.
    script = (
        "import sys\n"
        "from aios_rl.envs.base import make, registered\n"
        "assert 'aios_rl.envs.shell' not in sys.modules and registered() == []\n"
        "env = make('shell/bugfix-v1')\n"
        "print(type(env).__name__, registered())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ShellBugfixEnv ['shell/bugfix-v1']"


def test_unknown_version_suggests_shell_v1() -> None:
    expected = r"unknown environment id 'shell/bugfix-v2'; did you mean 'shell/bugfix-v1'\?"
    with pytest.raises(EnvError, match=expected):
        make("shell/bugfix-v2")


def test_unknown_family_lists_registered_ids() -> None:
    make("shell/bugfix-v1").close()  # registers the shell family whatever ran before
    with pytest.raises(EnvError, match=r"unknown environment id 'zzz/qqq-v9'; registered: .*shell/bugfix-v1"):
        make("zzz/qqq-v9")


@pytest.mark.parametrize("env_id", ["shell", "Shell/bugfix-v1", "shell/bugfix", "shell/bugfix-v1 ", "/x-v1"])
def test_register_rejects_malformed_ids(env_id: str, clean_registry: None) -> None:
    with pytest.raises(EnvError, match="must look like"):
        register(env_id, CounterEnv)


def test_register_refuses_to_rebind_an_id(clean_registry: None) -> None:
    register("toy/counter-v1", CounterEnv)
    with pytest.raises(EnvError, match="already registered"):
        register("toy/counter-v1", NoRestoreEnv)
