"""Session ownership across workers: leases with fencing epochs, planned three-phase transfers,
forced takeover of sessions whose worker died, and monitoring.

>>> from langgraph_handoff import ObjectStoreSaver
>>> from langgraph_handoff.ownership import SessionManager
>>> sessions = SessionManager(ObjectStoreSaver.from_url("memory://"))
>>> lease = sessions.acquire("chat-7", "worker-a", ttl=30)
>>> [(s.thread_id, s.status) for s in sessions.sessions()]
[('chat-7', 'owned')]
"""

from langgraph_handoff.ownership.lease import Lease, Transfer
from langgraph_handoff.ownership.manager import SessionInfo, SessionManager, session_note
from langgraph_handoff.ownership.worker import SessionWorker, WorkerStoppingError

__all__ = ["Lease", "SessionInfo", "SessionManager", "SessionWorker", "Transfer", "WorkerStoppingError", "session_note"]
