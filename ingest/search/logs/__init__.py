"""The room log on the read path: what a command reads of a room, the transcript fold over it, and
its memo."""
