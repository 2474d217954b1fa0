"""Benchmarks: run each module with python -m bench.NAME."""
