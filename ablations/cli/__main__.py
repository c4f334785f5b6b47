"""`python -m ablations.cli`: the same as `ablate`."""

import sys

from ablations.cli.ablate import main

sys.exit(main())
