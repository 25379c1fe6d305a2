"""The one tokenisation of source-code lines shared by the shell environment and the compact student.

Identifiers, numbers, multi-character operators, then any other single symbol: single-site edits
(``<`` -> ``<=``, ``+`` -> ``-``, ``and`` -> ``or``) must survive tokenisation as distinct tokens, both in the
student's hashed features (:mod:`aios_rl.policy.featurize`) and in the n-gram counts that score patches
(:mod:`aios_rl.envs.shell.naturalness`). It lives in this leaf package because ``envs`` and ``policy`` may
not import each other (ARCHITECTURE §3).
"""

from __future__ import annotations

import re

__all__ = ["CODE_TOKEN"]

CODE_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|<=|>=|==|!=|\*\*|//|->|\+=|-=|[^\sA-Za-z0-9_]")
