"""`python -m aios_rl` runs the CLI, the same as the `aios-rl` command."""

from aios_rl.cli.main import main

main()
