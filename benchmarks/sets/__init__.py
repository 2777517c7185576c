"""Independent retrieval evaluation sets (issue 24): one module per set, ``build(size, questions, seed)``."""
