"""The one error hierarchy of aios-rl.

Every error raised on purpose by the framework derives from :class:`AiosRlError`, so callers (and the
CLI, which turns them into a one-line message and exit code 2) can catch exactly our failures. Messages
say what was wrong, the value seen and what to do about it.
"""

from __future__ import annotations


class AiosRlError(Exception):
    """Base of every error aios-rl raises deliberately."""


class ConfigError(AiosRlError):
    """A configuration value or file is invalid (unknown key, bad value, bad YAML)."""


class ContractError(AiosRlError):
    """External input violates a contract (episode, task, teacher output, ...).

    Attributes:
        problems: one human-readable line per violation, each naming the field path, the bad value and
            what was expected.
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = list(problems or [])
        detail = "\n".join(self.problems)
        super().__init__(f"{message}\n{detail}" if detail else message)


class EnvError(AiosRlError):
    """An environment was misused or could not run (unknown env id, bad action, missing task files)."""


class SandboxError(EnvError):
    """The sandbox cannot be set up (bubblewrap missing or unusable). Never falls back to no sandbox."""


class StorageError(AiosRlError):
    """The run store or a checkpoint file is missing, corrupt or cannot be written."""


class RunLockedError(StorageError):
    """A run directory is already open for writing by another process (one writer per run at a time)."""


class LineageError(AiosRlError):
    """A lineage transition is not allowed in the current state (e.g. update while frozen)."""


class LedgerError(AiosRlError):
    """An epoch-ledger transition is not allowed in the current phase."""


class TeacherError(AiosRlError):
    """A teacher backend failed; the gateway records these on the episode instead of raising."""


class PolicyError(AiosRlError):
    """A policy could not be built, loaded or asked to act (bad model path, no candidates)."""


class TrainingError(AiosRlError):
    """A trainer update could not be computed (empty batch, non-finite loss)."""
