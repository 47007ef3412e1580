"""`muninn run`: the process, its composition root, the appservice and sync edges, the scheduler,
limits, metrics and the loopback listener."""
