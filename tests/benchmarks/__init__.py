"""Tests of the evaluation sets under ``benchmarks/sets``."""
