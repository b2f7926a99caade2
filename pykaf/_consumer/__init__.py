"""The consumer: partition consumers, per-broker fetchers, read_committed filtering."""
