"""The one writer: a room's events become windows, points and the records beside them (refresh,
generations, pages, windows, chunker, points, tombstones, records)."""
