"""Helpers shared by the test modules.

Test modules import from here and never from one another, so a helper has one home and
a test module can be read, moved or deleted on its own. Fixtures stay in ``tests/conftest.py``.
"""
