"""The storage format: keys, envelopes, head bodies and their typed metadata, deflate streams."""
