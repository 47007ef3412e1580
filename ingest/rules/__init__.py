"""Pure rules over plain records: which rooms, which events, what is scrubbed, how a date and a
word are written (docs/ARCHITECTURE.md §3)."""
