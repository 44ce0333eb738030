"""``tessera sessions``: this user's running sessions (sessions.main), run
as a module of its own so that the package's import of ``sessions`` does not
run it twice (runpy warns of that)."""
import sys

from .sessions import main

if __name__ == "__main__":
    sys.exit(main())
