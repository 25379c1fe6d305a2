"""Shell bug-fix environment; importing the package registers ``shell/bugfix-v1``."""

from aios_rl.envs.base import register
from aios_rl.envs.shell.env import ENV_ID, ShellBugfixEnv, ShellEnvConfig

register(ENV_ID, ShellBugfixEnv)

__all__ = ["ENV_ID", "ShellBugfixEnv", "ShellEnvConfig"]
