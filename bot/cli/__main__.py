"""`python -m bot.cli`: the same entry point as `muninn`."""

import sys

from bot.cli.main import main

sys.exit(main())
