"""Muninn's bot side: the service, commands, folds over the room log, and replies.

`bot` imports `ingest`; never the reverse.
"""
