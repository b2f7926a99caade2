"""Consumer groups (issue 5): assignors, the group session, offsets."""
