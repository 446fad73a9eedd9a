"""``python -m backends.engine FD``: the engine process, started by ``backends.engine.client``."""

import sys

from backends.engine.server import run

if __name__ == "__main__":
    sys.exit(run(int(sys.argv[1])))
