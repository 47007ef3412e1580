"""`muninn COMMAND`: the entry point (`main`), its help pages (`pages`) and `muninn roster`
(`roster/`). `muninn generate-registration` is the service's (`bot.service.registration`, with
the check `muninn run` makes at start); the command's other work is in `bot.operations`."""
