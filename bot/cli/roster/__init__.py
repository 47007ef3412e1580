"""The roster decides which rooms the reader joins.

The roster is data (`bot.roster`, which `muninn run` reads too, to keep an invite to a room it
lists). `plan` is a pure fold from the resolved roster and the reader's joined rooms to a list
of actions; the shell (`apply`) resolves aliases, reads what state it may, and joins and
leaves; `cli` is `muninn roster plan|apply --roster FILE`.

Scope before joining: Synapse answers 403 to `/rooms/{id}/state` for a room the reader is not
in (unless its history is world_readable, or the reader was a member before). What can be
known without state is still decided up front: an excluded room id, an excluded alias named by
the roster entry itself, a room in the reader's `m.direct`. Everything else (is_direct on the
invite, bridge state, puppets, encryption) is "verdict unknown until joined": `apply` joins,
reads the state, and leaves at once if scope refuses, before any event of the room is read.
A refresh racing that window is safe on its own: it decides scope before reading events too.
"""
