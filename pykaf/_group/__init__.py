"""Consumer groups: assignors, the group session and its member state table, offsets."""
