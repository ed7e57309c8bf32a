"""Benchmarks: the engine's wall time beside plain-Python baselines (docs/benchmarks.md).

Run them as a command, never from the test suite: ``.venv/bin/python benchmarks/engine.py``.
"""
