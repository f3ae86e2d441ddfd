"""`python -m memserver` is the `memserver` command."""

import sys

from memserver.cli.command import main

sys.exit(main())
