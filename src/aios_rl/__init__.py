"""aios-rl: one student policy trained across sandboxed environments under one safe control plane."""

__version__ = "0.1.0"
