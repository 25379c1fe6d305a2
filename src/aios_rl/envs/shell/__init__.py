"""Shell bug-fix environment."""
