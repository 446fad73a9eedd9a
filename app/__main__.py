"""``python -m app``: the same as the ``hearth`` command."""

from app.cli.main import main

# Guarded: worker processes started with "spawn" (the quantizer) import this module again and must not re-run it.
if __name__ == "__main__":
    raise SystemExit(main())
