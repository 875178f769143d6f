"""The saver: its API, heads and cache, graph runs and conformance, races, request counts, spill,
serde, TTL and the sweep, maintenance and listing, schema migrations and migrate, bad input and
damage."""
