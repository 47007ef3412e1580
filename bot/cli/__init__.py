"""`muninn COMMAND`: the entry point, its help pages, the roster and the registration."""
