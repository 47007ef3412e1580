"""`muninn mcp`: the read commands as Model Context Protocol tools (docs/ARCHITECTURE.md §4.7).

`server` declares the tools on the reference SDK; `lookups` answers them by the CLI's own read
paths; `context` is the pure read of the conversation around one message; `host` the JSON an
agent host adds to start it. Nothing is imported here: the SDK loads only for `muninn mcp`.
"""
