"""`python -m memserver` is the `memserver` command."""

import sys

from memserver.cli import main

sys.exit(main())
