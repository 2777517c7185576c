"""Tests of the evaluation sets under ``benchmarks/sets``: their structure, not retrieval quality."""
