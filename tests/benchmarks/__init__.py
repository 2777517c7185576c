"""Tests of the benchmarks: evaluation sets and the retrieval harness."""
