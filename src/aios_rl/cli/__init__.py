"""Command-line interface (typer). The only package that prints."""
