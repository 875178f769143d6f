"""The command line never runs code a stored value names, unless told which types to build.

A value of a type LangGraph's serializer does not know natively is stored naming its module and
type, and LangGraph's default reader imports and calls them. The command line runs on an
operator's machine over threads nobody vouched for, so it reads strictly: LangGraph's safe types
and those ``--allow-type`` names, any other shown as its stored arguments. ``migrate
--migrations`` is the exception it must be: your steps rewrite your values, built as your
workers build them.
"""

from __future__ import annotations

import json
from pathlib import Path

from langgraph_handoff import ObjectStoreSaver
from tests.support.planted import Planted
from tests.support.processes import run_main


def _planted_store(tmp_path: Path) -> tuple[str, Path]:
    url = f"file://{tmp_path / 'store'}"
    mark = tmp_path / "ran"
    with ObjectStoreSaver.from_url(url) as saver:
        cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for step in range(2):
            checkpoint = {
                "v": 4,
                "id": f"1f0c0000-0000-6000-8000-00000000000{step}",
                "ts": "2026-01-01T00:00:00+00:00",
                "channel_values": {"note": Planted(str(mark)) if step else "x"},
                "channel_versions": {"note": step + 1},
                "versions_seen": {},
                "updated_channels": None,
            }
            cfg = saver.put(cfg, checkpoint, {"source": "loop", "step": step}, {"note": step + 1})  # type: ignore[arg-type]
    mark.unlink()  # the constructor ran once, when the test built the value
    return url, mark


def test_reading_commands_show_an_unknown_type_as_its_arguments_and_never_build_it(tmp_path: Path) -> None:
    url, mark = _planted_store(tmp_path)
    shown = run_main("langgraph_handoff.cli", "show", url, "t", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["values"]["note"] == {"mark": str(mark)}
    history = run_main("langgraph_handoff.cli", "history", url, "t", "--json")
    first, second = (json.loads(line)["checkpoint_id"] for line in history.stdout.splitlines())
    diffed = run_main("langgraph_handoff.cli", "diff", url, "t", second, first, "--json")
    assert history.returncode == 0 and diffed.returncode == 0, (history.stderr, diffed.stderr)
    for command in (["threads", url], ["verify", url], ["sweep", url, "--dry-run", "--ttl", "1"]):
        assert run_main("langgraph_handoff.cli", *command).returncode in (0, 1)
    assert not mark.exists(), "a command built the planted type"


def test_allow_type_builds_the_types_it_names(tmp_path: Path) -> None:
    url, mark = _planted_store(tmp_path)
    shown = run_main(
        "langgraph_handoff.cli", "show", url, "t", "--json", "--allow-type", "tests.support.planted:Planted"
    )
    assert shown.returncode == 0, shown.stderr
    assert mark.exists()


def test_a_malformed_allow_type_is_refused(tmp_path: Path) -> None:
    url, _mark = _planted_store(tmp_path)
    refused = run_main("langgraph_handoff.cli", "show", url, "t", "--allow-type", "Planted")
    assert refused.returncode == 2 and "MODULE:NAME" in refused.stderr


def test_doctor_and_setup_say_whether_the_default_serializer_runs_named_code(tmp_path: Path) -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from langgraph_handoff.checkpoint.serde_policy import named_code_risk

    url = f"file://{tmp_path / 'store'}"
    here = named_code_risk(JsonPlusSerializer())  # this environment's default, as the command sees it
    setup = run_main("langgraph_handoff.cli", "setup", url, "--json")
    assert setup.returncode == 0, setup.stderr
    said = json.loads(setup.stdout)["serializer"]
    assert said == {"runs_code_named_by_stored_objects": here is not None, "detail": here}
    doctor = run_main("langgraph_handoff.cli", "doctor", url, "--rounds", "1")
    line = next(x for x in doctor.stdout.splitlines() if x.startswith("serializer: "))
    assert ("LANGGRAPH_STRICT_MSGPACK=true" in line) == (here is not None), line


def test_the_risk_is_named_for_each_kind_of_serializer() -> None:
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from langgraph_handoff.checkpoint.serde_policy import named_code_risk

    permissive = JsonPlusSerializer(allowed_msgpack_modules=True)
    assert "imports and calls" in (named_code_risk(permissive) or "")
    assert named_code_risk(JsonPlusSerializer(allowed_msgpack_modules=None)) is None
    assert named_code_risk(JsonPlusSerializer(allowed_msgpack_modules=[("myapp", "Order")])) is None
    assert "unpickles" in (
        named_code_risk(JsonPlusSerializer(allowed_msgpack_modules=None, pickle_fallback=True)) or ""
    )
    encrypted = EncryptedSerializer.from_pycryptodome_aes(permissive, key=b"k" * 16)
    assert "encryption does not stop it" in (named_code_risk(encrypted) or "")
