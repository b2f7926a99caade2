"""The consumer (issue 5): partition consumers, per-broker fetchers, read_committed."""
