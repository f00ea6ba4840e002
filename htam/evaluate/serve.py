"""Entry point of the fork server process (kept apart so ``python -m`` runs a module that the
package has not imported yet)."""

import sys

from htam.evaluate.forkserver import serve

if __name__ == "__main__":
    serve(int(sys.argv[1]))
