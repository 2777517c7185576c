"""``python -m lore_mcp`` is the same as the ``lore-memory`` command."""

from lore_mcp.cli.main import main

raise SystemExit(main())
