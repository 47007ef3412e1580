"""Muninn's bot side, a room a role: `chat` (which messages are commands, who may ask, what a
reply may quote, the replies), `service` (`muninn run`), `operations` (the CLI's commands),
`mcp` (`muninn mcp`), `demo` (`muninn demo`) and `cli` (`muninn COMMAND`). The room log's
values and its transcript fold are the read path's (`ingest.search.logs`); the pinboard fold
is chat's (`bot.chat.pinboard`).

`bot` imports `ingest`; never the reverse.
"""
