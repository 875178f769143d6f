"""A structure-aware fuzzer of every kind of stored object, read through every reader.

``seeds`` builds a store holding every object kind; ``mutate`` rewrites one object of it (its
msgpack structure under a valid envelope, or the envelope's bytes); ``readers`` reads the store
through each reader and checks what the package promises about damage; ``child`` runs cases in a
process with a memory cap; ``campaign`` drives children under a time limit and tabulates. The
short run is ``test_fuzz_short.py``; the long one ``scripts/fuzz``.
"""
