"""Agent teams: roster, mailboxes, workers, kills, the model and policy checks, and regression
tests named after the behaviour they guard (each keeps its story in its docstring)."""
