"""The room log on the read path: each room's latest raw events kept between commands (`recent`),
one bounded read of them (`roomlog`), what a command hands the read path (`request`), their
fusion with the index cut to each room's audience (`roomlogs`), the transcript fold (`transcript`)
and its memo (`memo`)."""
