"""Evaluation sets for recall, each built independently of the others and of ``benchmarks/`` (issue 24)."""
