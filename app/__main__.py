"""``python -m app``: the same as the ``hearth`` command."""

from app.cli import main

raise SystemExit(main())
