"""L3: the cluster client (metadata, leaders, coordinators, connection pool)."""
