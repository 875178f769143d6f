"""The langgraph-handoff command."""
