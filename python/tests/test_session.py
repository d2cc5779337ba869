"""A session's operations: the seed's results and refusals, and the
project's rules (SPEC §5 states, capacities, ids)."""

import collections

import pytest

import duplex_session as d

from conftest import AUDIO


def test_append_counts_per_epoch_and_turn(session, fence):
    assert session.append_input(mode=AUDIO, fence=fence) == d.DuplexInputAppend(1, 1, 0)
    assert session.append_input(mode=AUDIO, fence=fence) == d.DuplexInputAppend(2, 2, 0)
    turn1 = d.DuplexFence(fence.session_id, turn_id=1)
    assert session.append_input(mode=AUDIO, fence=turn1) == d.DuplexInputAppend(3, 1, 1)
    assert (session.input_seq, session.input_turn_seq, session.turn_id) == (3, 1, 1)
    epoch1 = d.DuplexFence(fence.session_id, epoch=1)
    assert session.append_input(mode=AUDIO, fence=epoch1) == d.DuplexInputAppend(1, 1, 0)
    assert session.epoch == 1


def test_unsupported_mode_is_the_seed_value_error(session, fence):
    with pytest.raises(ValueError) as e:
        session.append_input(mode=d.DuplexInputMode.APPEND_TOKENS, fence=fence)
    assert str(e.value) == f"Duplex input mode 'append_tokens' is not supported by session {fence.session_id}"
    assert e.value.kind == "unsupported_mode"
    assert session.input_seq == 0


def test_a_stale_fence_is_refused_with_both_fences(session, fence):
    newer = d.DuplexFence(fence.session_id, epoch=2)
    session.accept_fence(newer)
    with pytest.raises(d.DuplexFenceMismatchError) as e:
        session.append_input(mode=AUDIO, fence=fence)
    assert (e.value.expected, e.value.actual) == (newer, fence)
    assert session.fence == newer and session.input_seq == 0
    other = d.DuplexFence(fence.session_id, epoch=2, incarnation=1)
    with pytest.raises(d.DuplexFenceMismatchError):
        session.touch(other, d.DuplexLeaseActivity.HEARTBEAT)


def test_two_phase_append_and_a_stale_reservation(session, fence):
    r = session.prepare_append(mode=AUDIO, fence=fence)
    assert isinstance(r, d.DuplexAppendReservation)
    assert (r.base_input_seq, r.base_input_turn_seq, r.base_append_turn_key) == (0, 0, None)
    assert r.update == d.DuplexInputAppend(1, 1, 0) and session.input_seq == 0
    session.append_input(mode=AUDIO, fence=fence)
    with pytest.raises(RuntimeError, match="^duplex append reservation is stale$") as e:
        session.commit_append(r)
    assert e.value.kind == "stale_reservation"
    r2 = session.prepare_append(mode=AUDIO, fence=fence)
    assert r2.base_append_turn_key == (0, 0, 0)
    assert session.commit_append(r2) == d.DuplexInputAppend(2, 2, 0)
    forged = d.DuplexAppendReservation(
        fence, AUDIO, fence, 2, 2, (0, 0, 0), d.DuplexInputAppend(seq=99, turn_seq=3, turn_id=0)
    )
    with pytest.raises(RuntimeError, match="stale"):
        session.commit_append(forged)
    assert session.input_seq == 2


def test_bindings_resources_and_release(session, fence):
    session.reserve_stage_request(1, "tts-1", fence=fence)
    session.bind_stage_request(0, "llm-1", fence=fence)
    session.bind_stage_request(2, "llm-1", fence=fence)
    assert session.stage_request_ids() == ["llm-1", "llm-1"]
    assert session.resource_request_ids() == ["tts-1", "llm-1"]
    assert session.resource_request_ids(submitted=False) == ["tts-1"]
    assert session.stage_bindings == {
        0: d.DuplexStageBinding("llm-1", fence),
        2: d.DuplexStageBinding("llm-1", fence),
    }
    resources = session.request_resources
    assert resources[(1, "tts-1")] == d.DuplexRequestResource(1, "tts-1", fence, False)
    assert resources[(0, "llm-1")].submitted is True
    session.release_request_ids(["llm-1"])
    assert session.stage_request_ids() == [] and session.resource_request_ids() == ["tts-1"]


def test_a_resource_of_another_epoch_conflicts(session, fence):
    session.reserve_stage_request(0, "r", fence=fence)
    later = d.DuplexFence(fence.session_id, epoch=1)
    with pytest.raises(ValueError) as e:
        session.reserve_stage_request(0, "r", fence=later)
    assert str(e.value) == "Duplex request resource already reserved with different identity: r"
    assert e.value.kind == "resource_conflict"


def test_completed_appends_answer_retries_with_copies(session, fence):
    session.record_completed_append("append:1", fence=fence, mode=AUDIO, final=False, stage_results=[{"v": 1}])
    first = session.completed_append("append:1", fence=fence, mode=AUDIO, final=False)
    assert first == [{"v": 1}]
    first[0]["v"] = 99
    assert session.completed_append("append:1", fence=fence, mode=AUDIO, final=False) == [{"v": 1}]
    assert session.completed_append("append:2", fence=fence, mode=AUDIO, final=False) is None
    with pytest.raises(ValueError) as e:
        session.completed_append("append:1", fence=fence, mode=AUDIO, final=True)
    assert str(e.value) == "duplex append operation 'append:1' was reused with different metadata"
    assert e.value.kind == "operation_reused"
    view = session.completed_appends
    assert isinstance(view, collections.OrderedDict)
    assert view["append:1"] == d.DuplexCompletedAppend(fence, AUDIO, False, ({"v": 1},))


def test_completed_records_keep_what_was_given_in_either_shape(session, fence):
    """A record of one result under the session's own fence keeps only the
    result's items (the core keeps the rest); any other keeps its fence,
    mode and final as given. Both read back as the seed's records, and
    neither changes when the caller's dicts do."""
    later = d.DuplexFence(fence.session_id, epoch=0, turn_id=3, response_seq=2)
    other = d.DuplexFence("another-session", epoch=7)
    given = {"stage": 0, "request": "tts-1", "tokens": [1, 2]}
    session.record_completed_append("one", fence=later, mode=AUDIO, final=True, stage_results=[given])
    session.record_completed_append("two", fence=fence, mode=AUDIO, final=False, stage_results=[{"a": 1}, {"b": 2}])
    session.record_completed_append("none", fence=fence, mode=AUDIO, final=False, stage_results=[])
    session.record_completed_append("foreign", fence=other, mode=AUDIO, final=False, stage_results=[{"x": 1}])
    session.record_completed_append("as-int", fence=fence, mode="append_audio_chunk", final=1, stage_results=[{"y": 2}])
    given["stage"] = 9
    view = session.completed_appends
    assert list(view) == ["one", "two", "none", "foreign", "as-int"]
    assert view["one"] == d.DuplexCompletedAppend(later, AUDIO, True, ({"stage": 0, "request": "tts-1", "tokens": [1, 2]},))
    assert view["one"].mode is AUDIO and view["one"].final is True
    assert view["two"] == d.DuplexCompletedAppend(fence, AUDIO, False, ({"a": 1}, {"b": 2}))
    assert view["none"].stage_results == ()
    assert view["foreign"].fence is other
    assert view["as-int"].mode == "append_audio_chunk" and view["as-int"].final == 1
    assert list(view["one"].stage_results[0]) == ["stage", "request", "tokens"]
    hit = session.completed_append("one", fence=later, mode=AUDIO, final=True)
    assert hit == [{"stage": 0, "request": "tts-1", "tokens": [1, 2]}]
    hit[0]["stage"] = 5
    assert session.completed_append("one", fence=later, mode=AUDIO, final=True)[0]["stage"] == 0
    assert session.completed_append("two", fence=fence, mode=AUDIO, final=False) == [{"a": 1}, {"b": 2}]


def test_the_completed_window_is_the_seeds_256_with_its_eviction_order(session, fence):
    assert session.completed_append_limit == 256
    for i in range(300):
        session.record_completed_append(f"append:{i:040d}", fence=fence, mode=AUDIO, final=False, stage_results=[{"i": i}])
    ops = list(session.completed_appends)
    assert len(ops) == 256 and ops[0] == f"append:{44:040d}" and ops[-1] == f"append:{299:040d}"
    session.record_completed_append(ops[0], fence=fence, mode=AUDIO, final=True, stage_results=[])
    assert list(session.completed_appends)[-1] == ops[0]
    assert session.completed_append(f"append:{43:040d}", fence=fence, mode=AUDIO, final=False) is None
    assert session.completed_append(f"append:{100:040d}", fence=fence, mode=AUDIO, final=False) == [{"i": 100}]


def test_a_new_epoch_clears_the_completed_appends(session, fence):
    session.record_completed_append("op", fence=fence, mode=AUDIO, final=False, stage_results=[])
    session.accept_fence(d.DuplexFence(fence.session_id, epoch=1))
    assert session.completed_appends == collections.OrderedDict()


def test_barge_in_cancels_the_old_turn(session, fence):
    session.bind_stage_request(0, "talk", fence=fence)
    nxt = d.DuplexFence(fence.session_id, epoch=1)
    assert session.cancel_fence(fence, nxt) == ["talk"]
    assert session.fence == nxt and session.stage_request_ids() == []
    with pytest.raises(d.DuplexFenceMismatchError) as e:
        session.cancel_fence(nxt, fence)
    assert (e.value.expected, e.value.actual) == (nxt, fence)


def test_prepare_cancel_keeps_the_cleanup_records(session, fence):
    session.bind_stage_request(0, "talk", fence=fence)
    nxt = d.DuplexFence(fence.session_id, epoch=1)
    assert session.prepare_cancel_fence(fence, nxt) == ["talk"]
    assert session.fence == nxt and session.resource_request_ids() == ["talk"]
    assert session.release_fence(fence) == ["talk"]


def test_configs_are_copied_and_published_atomically(manager, fence):
    cfg = {"voice": "a"}
    s = manager.open_session(fence, session_config=cfg)
    assert s.session_config == cfg and s.session_config is not cfg
    assert s.runtime_config == {} and s.config_generation == 0
    s.replace_configs()
    assert s.config_generation == 0
    s.replace_configs(session_config={"voice": "b"}, runtime_config={"rate": 2})
    assert (s.session_config, s.runtime_config, s.config_generation) == ({"voice": "b"}, {"rate": 2}, 1)
    s.replace_session_config({"voice": "c"})
    s.replace_runtime_config({"rate": 3})
    assert s.config_generation == 3


def test_detached_sessions_refuse_client_input(session, fence):
    session.detach(fence)
    with pytest.raises(RuntimeError) as e:
        session.append_input(mode=AUDIO, fence=fence)
    assert e.value.kind == "wrong_state" and "detached" in str(e.value)
    session.bind_stage_request(0, "late-engine-work", fence=fence)
    assert session.resume(fence, expected_lease_generation=0) == 1
    assert session.append_input(mode=AUDIO, fence=fence).seq == 1


def test_closing_keeps_requests_until_finalized(session, fence):
    session.bind_stage_request(0, "r", fence=fence)
    assert session.begin_close(fence, reason="explicit_close") is True
    assert session.begin_close(fence, reason="other") is True
    assert session.lease.terminal_reason == "explicit_close"
    with pytest.raises(RuntimeError) as e:
        session.append_input(mode=AUDIO, fence=fence)
    assert e.value.kind == "wrong_state"
    assert session.resource_request_ids() == ["r"]
    assert session.finalize_close() == ["r"]
    with pytest.raises(RuntimeError) as e:
        session.bind_stage_request(0, "x", fence=fence)
    assert e.value.kind == "wrong_state"


def test_long_ids_up_to_128_bytes(manager):
    sid = "s" * 128
    f = d.DuplexFence(sid)
    s = manager.open_session(f)
    s.bind_stage_request(0, "r" * 128, fence=f)
    assert s.stage_request_ids() == ["r" * 128]
    with pytest.raises(ValueError) as e:
        s.bind_stage_request(1, "r" * 129, fence=f)
    assert e.value.kind == "invalid_id" and s.resource_request_ids() == ["r" * 128]
    with pytest.raises(ValueError) as e:
        manager.open_session(d.DuplexFence("x" * 129))
    assert e.value.kind == "invalid_id"


def test_a_full_table_is_refused_and_changes_nothing(session, fence):
    for i in range(16):
        session.reserve_stage_request(i, f"r{i}", fence=fence)
    with pytest.raises(RuntimeError) as e:
        session.reserve_stage_request(99, "one-too-many", fence=fence)
    assert e.value.kind == "full"
    assert len(session.resource_request_ids()) == 16


def test_a_session_can_be_made_on_its_own_as_the_seeds_dataclass(clock):
    f = d.DuplexFence("solo")
    lease = d.DuplexLeaseState(config=d.DuplexLeaseConfig(), generation=0, last_activity=clock())
    s = d.DuplexSessionRuntimeState(f, lease, clock, capabilities=d.DuplexRuntimeCapabilities(input_modes={AUDIO}))
    assert s.append_input(mode=AUDIO, fence=f) == d.DuplexInputAppend(1, 1, 0)
    assert s.lease.last_activity == 100.0 and s.completed_append_limit == 256
    with pytest.raises(ValueError) as e:
        d.DuplexSessionRuntimeState(f, lease, clock, input_seq=3)
    assert e.value.kind == "invalid_config"
    with pytest.raises(ValueError, match="^completed_append_limit must be positive$"):
        d.DuplexSessionRuntimeState(f, lease, clock, completed_append_limit=0)
