"""`python -m harness`: hands the command line to harness.cli."""

import sys

from harness.cli import main

sys.exit(main())
