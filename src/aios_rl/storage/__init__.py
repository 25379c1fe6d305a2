"""The only package that writes SQL or checkpoint files."""
