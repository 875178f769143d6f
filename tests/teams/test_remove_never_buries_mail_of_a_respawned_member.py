"""remove() is a roster CAS followed by a separate LIST+move of the inbox (_plan_bury). A member
re-spawned under the same name between the two, and a message sent to it (the send checked the
roster: bob exists, and returned), is moved to dead/ by the old remove: a message sent to a live
recipient is never ingested.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import MemoryStore
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_helpers import Clock, echo_build, ingested_ids


class HookStore(MemoryStore):
    hook = None

    def list_page(self, prefix, *, start_after=None, max_keys=1000):
        if self.hook is not None and prefix == "teams/t/inbox/bob/":
            hook, self.hook = self.hook, None
            hook()
        return super().list_page(prefix, start_after=start_after, max_keys=max_keys)


def test_a_message_to_the_respawned_member_is_not_buried_by_the_remove_that_preceded_the_spawn():
    store = HookStore()
    saver = ObjectStoreSaver(store)
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("bob", role="echo")
    other = Team(saver, "t", clock=Clock())
    sent = []

    def respawn_and_send():  # another process, between remove's roster CAS and its bury
        other.spawn("bob", role="echo")
        sent.append(other.send("bob", "welcome back", sender="lead"))

    store.hook = respawn_and_send
    team.remove("bob")
    assert "bob" in team.roster().members
    w = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False)
    w.step()
    w.step()
    assert ingested_ids(saver, team, "bob") == [sent[0].id], [d.key for d in team.dead_letters()]
