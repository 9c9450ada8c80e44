"""``python -m attention_fw.encoder``: fetch the trained encoder's files into the cache and verify them
(see :func:`attention_fw.encoder.files.main`)."""
import sys

from .files import main

if __name__ == "__main__":
    sys.exit(main())
