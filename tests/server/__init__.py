"""The Agent Server factories: checkpointer and store settings, the index and TTL sweeps."""
