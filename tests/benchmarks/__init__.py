"""Tests of the evaluation sets under benchmarks/sets (pure Python, fast lane)."""
