"""What chat counts: commands by outcome, a search's time, replies given up.

Declared here, beside the code that counts, so chat needs nothing of the service; `muninn run`
registers them in its own registry (`bot.service.metrics.ServiceMetrics.chat`) and exports them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["LATENCY_BUCKETS", "ChatMetrics"]

# Seconds; a search on the embedded defaults takes ~5-50 ms, a slow Ollama several seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class ChatMetrics:
    """The chat's metrics, in `registry` (a private one when none is given: the fast tier)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else CollectorRegistry()
        self.search_latency = Histogram(
            "muninn_search_latency_seconds",
            "Time to answer a search.",
            ["source"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.commands = Counter(
            "muninn_commands_total",
            "Commands handled, by name and outcome.",
            ["command", "outcome"],
            registry=r,
        )
        self.replies_given_up = Counter(
            "muninn_replies_given_up_total",
            "Replies never sent: the homeserver stayed down past the command's useful age.",
            registry=r,
        )
