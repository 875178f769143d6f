"""Bad input to the public Team API: untyped errors, and one that bricks the roster.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import InvalidInputError, LangGraphHandoffError
from langgraph_handoff.teams import Team


def make():
    team = Team(ObjectStoreSaver.from_url("memory://"), "t")
    team.spawn("lead", role="echo")
    team.spawn("bob", role="echo")
    return team


def test_mark_failed_with_a_non_text_reason_is_refused_and_does_not_corrupt_the_roster():
    """`_set_state` builds the new Member with model_copy(update=...), which skips validation: the
    roster is written with reason={...}, and every later roster read raises CorruptObjectError
    (the whole team is down: workers' step(), spawn, status...)."""
    team = make()
    with pytest.raises(InvalidInputError):
        team.mark_failed("bob", {"why": "tests fail"})
    team.roster()  # must stay readable (today: CorruptObjectError, for good)


def test_send_with_a_non_text_idempotency_key_is_a_typed_error():
    team = make()
    with pytest.raises(InvalidInputError):
        team.send("bob", "x", sender="lead", idempotency_key=5)  # TypeError from message_id's join


def test_send_with_unserializable_data_is_a_typed_error():
    team = make()
    with pytest.raises(InvalidInputError):
        team.send("bob", "x", sender="lead", data={"k": object()})  # PydanticSerializationError


@pytest.mark.parametrize("call", ["remove", "inbox"])
def test_remove_and_inbox_of_a_non_text_name_are_typed_errors(call):
    team = make()
    with pytest.raises(LangGraphHandoffError):
        getattr(team, call)(5)  # AttributeError: 'int' object has no attribute 'encode'


@pytest.mark.parametrize("kw", [{"batch": 0}, {"batch": -1}, {"max_failures": 0}, {"poll": -1}])
def test_team_worker_refuses_settings_that_stop_it_from_working(kw):
    """batch=0: select(limit=0) makes every message `held`, nothing is ever ingested and a
    requested shutdown never happens (`more` is always true); batch=-1 always leaves the newest
    message behind; max_failures=0 marks a member failed at its first hiccup."""
    from langgraph_handoff.teams import TeamWorker
    from tests.support.team_helpers import echo_build

    team = make()
    with pytest.raises(InvalidInputError):
        TeamWorker(team, "w", {"echo": echo_build}, **kw)
