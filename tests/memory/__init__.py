"""ObjectStoreMemory: long-term memory, its semantic index, TTL and the e5 embedder."""
