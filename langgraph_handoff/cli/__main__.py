"""``python -m langgraph_handoff.cli``: the ``langgraph-handoff`` command."""

import sys

from langgraph_handoff.cli import main

sys.exit(main())
