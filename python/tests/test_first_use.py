"""What a new user meets first, as issue reports found it: the seed's
`close` on an open session, a profile's own window, arguments of the wrong
type refused with the documented exception and kind (changing nothing),
and a repr that says what the object is."""

import pytest

import duplex_session as d

from conftest import AUDIO


def test_close_on_an_open_session_releases_each_request_once_and_leaves_it_open(session, fence):
    session.bind_stage_request(0, "llm-1", fence=fence)
    session.reserve_stage_request(1, "tts-1", fence=fence)
    assert session.close() == ["llm-1", "tts-1"]
    assert session.stage_bindings == {} and session.request_resources == {}
    assert session.lease.terminal_reason is None
    assert session.append_input(mode=AUDIO, fence=fence).seq == 1  # still open
    assert session.close(fence) == []  # nothing is released twice


def test_close_on_a_detached_session_keeps_it_detached(session, fence):
    session.bind_stage_request(0, "llm-1", fence=fence)
    session.lease.detach(100.0)
    assert session.close() == ["llm-1"]
    assert session.lease.detached_at == 100.0


def test_the_conformance_profile_brings_its_own_window(clock):
    m = d.DuplexSessionRuntimeManager(clock=clock, profile="conformance")
    assert m.open_session(d.DuplexFence("s")).completed_append_limit == 8
    assert d.DuplexSessionRuntimeManager(clock=clock).open_session(d.DuplexFence("s")).completed_append_limit == 256


def test_a_fence_of_the_wrong_type_is_a_type_error_and_changes_nothing(session, fence):
    session.append_input(mode=AUDIO, fence=fence)
    with pytest.raises(TypeError) as e:
        session.append_input(mode=AUDIO, fence="s1")
    assert e.value.kind == "invalid_argument"
    assert "DuplexFence" in str(e.value) and "str" in str(e.value)
    assert session.input_seq == 1


@pytest.mark.parametrize("field", ["idle_ttl_s", "disconnect_grace_s"])
def test_a_lease_duration_that_is_not_a_number_is_invalid_config(field):
    with pytest.raises(TypeError) as e:
        d.DuplexLeaseConfig(**{field: "x"})
    assert e.value.kind == "invalid_config"
    assert str(e.value).startswith(f"{field} must be a number of seconds")
    # What the seed accepts stays accepted.
    assert d.DuplexLeaseConfig(**{field: 2}).__getattribute__(field) == 2


def test_a_clock_that_cannot_be_called_is_refused_at_construction():
    with pytest.raises(TypeError) as e:
        d.DuplexSessionRuntimeManager(clock=5)
    assert e.value.kind == "invalid_config"
    assert str(e.value) == "clock must be a callable returning float seconds, got int"


def test_repr_names_the_session_and_the_manager(manager, session, fence):
    session.bind_stage_request(0, "llm-1", fence=fence)
    session.append_input(mode=AUDIO, fence=fence)
    text = repr(session)
    assert text.startswith(f"<DuplexSessionRuntimeState '{fence.session_id}' open epoch=0 turn=0")
    assert "input_seq=1" in text and "requests=1" in text
    assert repr(manager) == (
        "<DuplexSessionRuntimeManager profile='server' sessions=1 max_sessions=None completed_append_limit=256>"
    )
    manager.close_session(fence)
    assert f"'{fence.session_id}' closed" in repr(session)
