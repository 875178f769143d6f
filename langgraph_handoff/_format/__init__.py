"""The storage format: everything that decides what the bytes on the store are.

* :mod:`.keys`: where each object lives (thread ids, namespaces and checkpoint ids become keys);
* :mod:`.envelope`: the versioned, checksummed frame around every stored object, and its kinds;
* :mod:`.records`: what heads, sealed segments and writes documents hold (the checkpoint data
  model and its msgpack encoding);
* :mod:`.upgrades`: the numbered steps from each older storage format to this one.
* :mod:`.damage`: the record a walk over many objects keeps of one it could not read.

They sit together because they change together: a change to what an object holds bumps
``envelope.FORMAT_VERSION`` and registers its step in :mod:`.upgrades`, and a new kind of object
takes a new ``envelope.Kind`` number and a key in :mod:`.keys`. Nothing here does I/O; the saver
(:mod:`langgraph_handoff.checkpoint`), memory, teams and ownership read and write through it.
"""
