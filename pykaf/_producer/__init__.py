"""The producer (issue 4): its options, partitioners and, later, batching and delivery."""
