"""Teachers that critique episodes and shape rewards: LLM CLIs, an OpenAI-compatible HTTP endpoint, or an
oracle passed in by the caller, behind one gateway with fallbacks, retries, a cache and metrics.

Entry points: :class:`TeacherGateway` (``signal(task, episode) -> TeacherSignal``), :class:`TeacherConfig`,
:func:`calibrate` and :class:`DisagreementMonitor` for judge governance. This package never imports
``envs/``: environment-specific oracles are handed in by the caller.
"""

from aios_rl.teacher.backend import BackendFailure, BackendReply, PromptBackend
from aios_rl.teacher.calibrate import (
    CalibrationReport,
    CalibrationThresholds,
    DisagreementAlarm,
    DisagreementMonitor,
    MonitorConfig,
    calibrate,
)
from aios_rl.teacher.gateway import (
    BACKENDS,
    TeacherConfig,
    TeacherGateway,
    checked_backends,
    make_backend,
    resolve_backend,
    teacher_backends,
)
from aios_rl.teacher.parse import ReplyProblem, TeacherAnswer, parse_reply
from aios_rl.teacher.prompts import build_prompt

__all__ = [
    "BACKENDS",
    "BackendFailure",
    "BackendReply",
    "CalibrationReport",
    "CalibrationThresholds",
    "DisagreementAlarm",
    "DisagreementMonitor",
    "MonitorConfig",
    "PromptBackend",
    "ReplyProblem",
    "TeacherAnswer",
    "TeacherConfig",
    "TeacherGateway",
    "build_prompt",
    "calibrate",
    "checked_backends",
    "make_backend",
    "parse_reply",
    "resolve_backend",
    "teacher_backends",
]
