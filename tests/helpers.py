"""Moved to ``tests/support/helpers.py``; this name stays only while
``tests/test_retrieval_quality.py`` (being changed elsewhere) still imports from here."""

from tests.support.helpers import call

__all__ = ["call"]
