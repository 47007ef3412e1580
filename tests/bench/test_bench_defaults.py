"""The benchmarks measure the product as shipped: each one's embedder is the default one."""

from __future__ import annotations

import importlib

import pytest

from ingest.config import default_local_model


@pytest.mark.parametrize(
    "name", ["bench.ingest", "bench.latency", "bench.load", "bench.harness.probes"]
)
def test_bench_embedder_defaults_to_the_products(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--embedder-model` defaults to `embedder.model`'s default (the pair where e5 is
    installed), and its help says which model that is."""
    with pytest.raises(SystemExit):
        importlib.import_module(name).main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"default the product's: {default_local_model()}" in help_text
