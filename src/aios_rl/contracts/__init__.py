"""Leaf package: contract records, protocols, configuration base and the error hierarchy."""
