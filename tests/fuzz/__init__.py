"""Seeded, bounded fuzzing of Tessel's entry points (see tests/fuzz/driver.py).

    python -m tests.fuzz --minutes 10 [--target NAME] [--seed S]
"""
