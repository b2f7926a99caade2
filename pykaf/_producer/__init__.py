"""The producer: its options, partitioners, and the pipeline stages (see producer.py)."""
