"""Incoming commands: which events are commands (`incoming`, read once on receipt, each
asker's rate), and the in-room command grammar (docs/ARCHITECTURE.md §4.6), declared once;
usage and help are generated from it.

`parse` is pure: a message body in, a typed command (or None, or a typed `UsageError`) out. What a
command may *do* (visibility, allow-lists, the reply relation of `!pin`) is the handler's policy.
Nothing here imports the formatting desk (`bot.chat.replies`): an `Incoming` knows the command
it answers as `bot.chat.content.ReplyTo`.

By job: `incoming` (an event read once into `Incoming`, `RateLimit`, `BoundedSeen`), `records`
(the typed commands and usage errors), `spec` (a command's declaration), `tokens` (arguments as
tokens), `builders` (tokens into commands), `grammar` (`COMMANDS` and the entry points), with
`arguments`, `dates` and `patterns` (bounded `/regex/`). Import each name from the module that
owns it.
"""
