"""The store a backend opens: what ``stores.open_local_store`` and ``open_postgres_store`` return.

Lessons plus what lives beside them: the project transaction of structured memory and history, orgs
and API keys, and on a shared database per-key call counts. Imports are a ``save_many`` keeping ids.
Every backend opens the one ``SqlStore`` over its leaf, so that class is the contract, declared once."""

from __future__ import annotations

from stores.engine.lesson_rules import SqlStore

Store = SqlStore
