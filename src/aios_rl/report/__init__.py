"""Reports: plots and tables built from what runs and benchmarks measured."""
