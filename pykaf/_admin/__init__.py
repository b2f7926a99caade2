"""The admin client (``pykaf.open_admin``): topics, configs, groups, offsets, records."""
