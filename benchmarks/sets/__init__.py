"""Evaluation sets written independently of the other benchmark generators (issue 24)."""
