"""Trainers and their pure math: advantage estimators and loss functions (``advantages``, ``losses``)."""
