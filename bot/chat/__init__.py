"""Chat: which messages are commands, who may ask, what a reply may quote, and the reply itself."""
