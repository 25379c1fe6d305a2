"""`python -m aios_rl.cli` runs the CLI (used by tests to reach the installed entry point's code)."""

from aios_rl.cli.main import main

main()
