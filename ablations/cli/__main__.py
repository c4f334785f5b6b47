"""`python -m ablations.cli`: the same as `ablate`."""

import sys

from ablations.cli.main import main

sys.exit(main())
