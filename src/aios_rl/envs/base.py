"""The environment registry and :func:`check_env`, the contract test every adapter must pass.

Environments are picked by versioned id (``shell/bugfix-v1``), Gymnasium-style: a package registers a
factory under an id when it is imported, and :func:`make` imports ``aios_rl.envs.<family>`` on first
use of an id of that family, so callers need not import adapters themselves. An unknown id raises
:class:`EnvError` with the closest registered ids.

:func:`check_env` drives a real adapter through reset, steps, snapshot/restore, verify and close and
raises :class:`EnvError` naming the first check that failed. Its leakage checks run the same actions on
the task and on a copy whose ``oracle`` is empty, and require identical observations (text, candidates
and all features); they also search observation texts for the oracle's payload strings.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import logging
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from aios_rl.contracts.episode import Observation, StepResult, Task, Verification
from aios_rl.contracts.errors import EnvError
from aios_rl.contracts.protocols import Env

logger = logging.getLogger(__name__)

EnvFactory = Callable[..., Env]
_ENV_ID = re.compile(r"^[a-z][a-z0-9_]*/[a-z0-9][a-z0-9_.-]*-v\d+$")
_REGISTRY: dict[str, EnvFactory] = {}
INVALID_PROBE_ACTION = "\x00 not an action \x00"
# Oracle strings shorter than this, or plain names and paths (a function or file the student sees in
# tracebacks and listings anyway), are not searched for: they would match legitimate observations.
MIN_PAYLOAD_CHARS = 12
_PLAIN_NAME = re.compile(r"^[\w./<>:-]+$")


def register(env_id: str, factory: EnvFactory) -> None:
    """Register ``factory`` (called with ``make``'s keyword arguments) under ``env_id``.

    Registering the same factory again is a no-op, so re-importing a package is harmless.

    Raises:
        EnvError: ``env_id`` is not of the form ``family/name-vN``, or is taken by another factory.
    """
    if not _ENV_ID.match(env_id):
        raise EnvError(f"environment id {env_id!r} must look like 'family/name-v1' (lowercase, versioned)")
    existing = _REGISTRY.get(env_id)
    if existing is not None and existing is not factory:
        raise EnvError(f"environment id {env_id!r} is already registered to {existing!r}; bump the version")
    _REGISTRY[env_id] = factory


def registered() -> list[str]:
    """The registered environment ids, sorted."""
    return sorted(_REGISTRY)


def make(env_id: str, **kwargs: Any) -> Env:
    """Build the environment registered under ``env_id``.

    Args:
        env_id: e.g. ``"shell/bugfix-v1"``.
        **kwargs: passed to the factory (e.g. ``config=ShellEnvConfig(...)``).

    Raises:
        EnvError: the id is unknown (the message suggests the closest registered ids).
    """
    if env_id not in _REGISTRY:
        _import_family(env_id)
    factory = _REGISTRY.get(env_id)
    if factory is None:
        close = difflib.get_close_matches(env_id, registered(), n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else \
            f"registered: {', '.join(registered()) or 'none'}"
        raise EnvError(f"unknown environment id {env_id!r}; {hint}")
    return factory(**kwargs)


def _import_family(env_id: str) -> None:
    family = env_id.split("/", 1)[0]
    if not re.fullmatch(r"[a-z][a-z0-9_]*", family):
        return
    name = f"{__package__}.{family}"
    if importlib.util.find_spec(name) is not None:
        importlib.import_module(name)  # its __init__ registers the family's ids


def check_env(env: Env, task: Task, *, seed: int = 0, actions: Sequence[str] | None = None) -> None:
    """Validate an adapter against the Env protocol on a real task; raise naming the first failed check.

    Checks: the adapter has the protocol's attributes; ``reset`` returns a well-formed Observation
    (finite features, one feature dict per candidate); each ``step`` returns a well-formed StepResult;
    a malformed action is a step flagged ``info["invalid_action"]``, not an exception; restoring one
    snapshot twice and taking the same actions gives identical observations; ``verify`` returns a
    Verification; the oracle-free twin task gives identical observations; no observation text holds an
    oracle payload string; ``close`` works.

    Args:
        env: the adapter under test (it is closed at the end).
        task: a real task of the adapter's environment.
        seed: passed to every reset.
        actions: actions to take; default: the first candidate of the reset observation. Leave out
            actions that reveal the fix (taking the reference fix legitimately shows its lines).

    Raises:
        EnvError: ``check_env[<check>]: <what was wrong>``.
    """
    _require(isinstance(env, Env), "protocol", f"{type(env).__name__} lacks Env attributes or methods")
    _require(isinstance(getattr(env, "env_id", None), str) and isinstance(getattr(env, "version", None), str),
             "protocol", "env_id and version must be strings")
    first = _reset(env, task, seed)
    plan = list(actions) if actions is not None else first.candidates[:1]
    _require(bool(plan), "actions", "no actions given and the reset observation has no candidates")
    start = _call(env.snapshot, "snapshot")
    trace = [first, *_run_actions(env, plan, "step")]
    for attempt in ("restore", "restore_again"):
        _call(lambda: env.restore(start), attempt)
        again = _run_actions(env, plan, attempt)
        _require(again == trace[1:], attempt, "the same actions after restore gave different observations")
    _call(lambda: env.restore(start), "restore")
    bad = _call(lambda: env.step(INVALID_PROBE_ACTION), "invalid_action")
    _check_step(bad, "invalid_action")
    _require(bad.info.get("invalid_action") is True, "invalid_action", "info['invalid_action'] is not True")
    verification = _call(env.verify, "verify")
    _require(isinstance(verification, Verification), "verify", f"returned {type(verification).__name__}")
    twin = task.model_copy(update={"oracle": {}})
    twin_trace = [_reset(env, twin, seed), *_run_actions(env, plan, "oracle_independence")]
    _require(twin_trace == trace, "oracle_independence",
             "observations change when the task's oracle is removed")
    for i, obs in enumerate(trace):
        leaked = find_oracle_text(task.oracle, obs.text)
        _require(leaked is None, "no_leakage", f"observation {i} contains oracle text {str(leaked)[:80]!r}")
    _call(env.close, "close")


def oracle_payload_strings(oracle: Mapping[str, Any]) -> list[str]:
    """The oracle strings an observation must never show, whitespace-collapsed, longest first.

    Every string value (nested ones included) of at least :data:`MIN_PAYLOAD_CHARS` characters that is
    not a plain name or path; and for a unified diff, the new side of each hunk (context and added
    lines, blank lines dropped). Single added lines are not searched for: fixed code often repeats a
    line found elsewhere in the buggy repository (11% of 224 sampled seed mutants), while a whole hunk
    never did.
    """
    found: set[str] = set()
    for value in _strings(oracle):
        text = value.strip()
        if len(text) >= MIN_PAYLOAD_CHARS and not _PLAIN_NAME.match(text):
            found.add(_collapse(text))
        for hunk in re.split(r"(?m)^@@.*\n?", text)[1:]:
            lines = [line for line in hunk.splitlines() if not line.startswith(("+++ ", "--- "))]
            new_side = [line[1:] for line in lines if line[:1] in (" ", "+") and line[1:].strip()]
            if new_side and len(_collapse("\n".join(new_side))) >= MIN_PAYLOAD_CHARS:
                found.add(_collapse("\n".join(new_side)))
    return sorted(found, key=lambda s: (-len(s), s))


def find_oracle_text(oracle: Mapping[str, Any], text: str) -> str | None:
    """The first oracle payload string (see :func:`oracle_payload_strings`) that ``text`` shows, or None.

    Whitespace runs are collapsed on both sides, so re-indented or re-wrapped oracle text still counts.
    """
    haystack = _collapse(text)
    return next((s for s in oracle_payload_strings(oracle) if s in haystack), None)


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _reset(env: Env, task: Task, seed: int) -> Observation:
    obs = _call(lambda: env.reset(task, seed=seed), "reset")
    _check_observation(obs, "reset")
    return obs


def _run_actions(env: Env, plan: Sequence[str], check: str) -> list[Observation]:
    observations = []
    for action in plan:
        result = _call(lambda a=action: env.step(a), check)
        _check_step(result, check)
        observations.append(result.observation)
        if result.terminated or result.truncated:
            break
    return observations


def _check_step(result: Any, check: str) -> None:
    _require(isinstance(result, StepResult), check, f"step returned {type(result).__name__}, not StepResult")
    _check_observation(result.observation, check)
    _require(isinstance(result.reward, float) and math.isfinite(result.reward), check, "reward is not finite")
    _require(isinstance(result.info, dict), check, "info is not a dict")


def _check_observation(obs: Any, check: str) -> None:
    _require(isinstance(obs, Observation), check, f"got {type(obs).__name__}, not an Observation")
    _require(bool(obs.text), check, "observation text is empty")
    _require(len(obs.candidate_features) in (0, len(obs.candidates)), check,
             f"{len(obs.candidate_features)} candidate feature dicts for {len(obs.candidates)} candidates")
    _require(len(set(obs.candidates)) == len(obs.candidates), check, "candidates repeat")
    layouts = {tuple(f) for f in obs.candidate_features}
    _require(len(layouts) <= 1, check, "candidate feature dicts have different keys")
    values = [*obs.features.values(), *(v for f in obs.candidate_features for v in f.values())]
    _require(all(math.isfinite(v) for v in values), check, "a feature is not finite")


def _call(fn: Callable[[], Any], check: str) -> Any:
    try:
        return fn()
    except Exception as exc:  # any crash of the adapter is a failed check; re-raised with its name
        raise EnvError(f"check_env[{check}]: raised {type(exc).__name__}: {exc}") from exc


def _require(ok: bool, check: str, problem: str) -> None:
    if not ok:
        raise EnvError(f"check_env[{check}]: {problem}")
