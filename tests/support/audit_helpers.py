"""An audit sink that keeps what it is given, for the handoff graph's tests."""

from __future__ import annotations

from langgraph_handoff.handoff.audit import AuditRecord


class Sink:
    """Keeps every audit record handed to it, sync or async, in order."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def write(self, record: AuditRecord) -> None:
        self.records.append(record)

    async def awrite(self, record: AuditRecord) -> None:
        self.records.append(record)
