//! `SessionKey`: a handle that reaches a session without its id's hash
//! while the session is there, and never reaches another session.

use duplex_core::{
    AnySession, CloseReason, Error as CoreError, ErrorKind, Fence, Id, InputMode, ManualClock,
    OpenOptions, StateKind,
};
use duplex_std::{
    Host, ManagerConfig, MonotonicClock, SessionKey, SessionManager, Sessions, SharedManager,
};

fn manager() -> SessionManager<ManualClock> {
    SessionManager::new(ManualClock::default(), ManagerConfig::default()).expect("manager")
}

fn append(
    m: &mut SessionManager<ManualClock>,
    key: SessionKey,
    f: &Fence,
) -> Option<Result<u64, CoreError>> {
    m.update_at(key, |s| s.append(f, InputMode::TurnCommitOnly))
        .map(|r| r.map(|a| a.seq))
}

#[test]
fn a_key_reaches_its_session_through_every_state_change() {
    let mut m = manager();
    let f = Fence::new(Id::new("s").unwrap(), 0);
    m.open(f.clone(), OpenOptions::default()).unwrap();
    let key = m.key(&f.session).unwrap();
    assert_eq!(append(&mut m, key, &f), Some(Ok(1)));
    m.detach(&f).unwrap();
    // Refusals pass through unchanged.
    let refused = append(&mut m, key, &f).unwrap().unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::WrongState);
    let generation = m.apply_at(key, |s, now| s.resume(&f, 0, now)).unwrap();
    assert_eq!(generation, Ok(1));
    assert_eq!(append(&mut m, key, &f), Some(Ok(2)));
    assert_eq!(
        m.key(&f.session),
        Some(key),
        "the key does not change while the session stays"
    );
}

#[test]
fn a_key_outlives_its_session_only_as_a_key_that_no_longer_matches() {
    let mut m = manager();
    let (a, b) = (
        Fence::new(Id::new("a").unwrap(), 0),
        Fence::new(Id::new("b").unwrap(), 0),
    );
    m.open(a.clone(), OpenOptions::default()).unwrap();
    let old = m.key(&a.session).unwrap();
    let _ = m.close(&a, CloseReason::ClientClose).unwrap();
    // The slot is reused by another session: the old key does not reach it.
    m.open(b.clone(), OpenOptions::default()).unwrap();
    assert_eq!(m.key(&b.session).unwrap().slot(), old.slot());
    assert_eq!(append(&mut m, old, &b), None);
    assert!(m.get_at(old).is_none());
    assert_eq!(m.inspect(&b.session).unwrap().input_seq, 0, "b untouched");
    // A new session of the old id has a new key.
    let again = Fence::new(a.session.clone(), 1);
    m.open(again.clone(), OpenOptions::default()).unwrap();
    assert_ne!(m.key(&a.session), Some(old));
}

#[test]
fn an_exported_sessions_key_no_longer_matches() {
    let mut m = manager();
    let f = Fence::new(Id::new("moving").unwrap(), 0);
    m.open(f.clone(), OpenOptions::default()).unwrap();
    let key = m.key(&f.session).unwrap();
    let session = m.export("moving").unwrap();
    assert_eq!(append(&mut m, key, &f), None);
    let moved = m.import(session, 1).unwrap();
    let new_key = m.key(&moved.session).unwrap();
    assert_ne!(new_key, key);
    assert_eq!(append(&mut m, new_key, &moved), Some(Ok(1)));
}

#[test]
fn a_session_closed_where_it_sits_stays_listed_until_removed() {
    let mut m = SessionManager::<ManualClock>::new(
        ManualClock::default(),
        ManagerConfig {
            max_sessions: Some(1),
            ..ManagerConfig::default()
        },
    )
    .unwrap();
    let f = Fence::new(Id::new("s").unwrap(), 0);
    m.open(f.clone(), OpenOptions::default()).unwrap();
    let key = m.key(&f.session).unwrap();
    m.bind(&f, 0, "r").unwrap();
    // Removing a session that is not closed is refused and changes nothing.
    let before = m.inspect(&f.session).unwrap();
    let refused = m.remove_closed_at(key).unwrap().unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::WrongState);
    assert_eq!(m.inspect(&f.session).unwrap(), before);
    assert_eq!((m.len(), m.key(&f.session)), (1, Some(key)));
    let mut released = duplex_core::RequestIds::new();
    m.update_at(key, |s| {
        s.close_into(&f, CloseReason::ExplicitClose, &mut released)
    })
    .unwrap()
    .unwrap();
    assert_eq!(released.len(), 1);
    assert_eq!(m.get_at(key).unwrap().kind(), StateKind::Closed);
    // Still counted: admission refuses a second session.
    let g = Fence::new(Id::new("t").unwrap(), 0);
    let full = m.open(g.clone(), OpenOptions::default()).unwrap_err();
    assert_eq!(full.kind(), ErrorKind::CapacityExhausted);
    // Nothing is due for a closed session.
    assert!(m.collect_expired([]).is_empty());
    m.remove_closed_at(key).unwrap().unwrap();
    assert!(m.is_empty());
    assert_eq!(m.remove_closed_at(key), None);
    m.open(g, OpenOptions::default()).unwrap();
}

// The shared manager's keys: the same rules through the shard's lock, and
// admission kept exact.

fn shared(max: Option<usize>) -> SharedManager<MonotonicClock> {
    let config = ManagerConfig {
        max_sessions: max,
        ..ManagerConfig::default()
    };
    SharedManager::with_shards(MonotonicClock::new(), config, 4).expect("manager")
}

#[test]
fn a_refused_keyed_open_changes_nothing() {
    let m = shared(Some(1));
    let f = Fence::new(Id::new("a").unwrap(), 0);
    let key = m.open_keyed(f.clone(), OpenOptions::default()).unwrap();
    m.update_at(key, |s| s.append(&f, InputMode::TurnCommitOnly))
        .unwrap()
        .unwrap();
    let before = m.inspect(&f.session).unwrap();
    // The same id again: refused before admission is asked.
    let again = Fence::new(f.session.clone(), 1);
    let exists = m.open_keyed(again, OpenOptions::default()).unwrap_err();
    assert_eq!(exists.kind(), ErrorKind::SessionExists);
    // Another id past the cap.
    let b = Fence::new(Id::new("b").unwrap(), 0);
    let full = m.open_keyed(b.clone(), OpenOptions::default()).unwrap_err();
    assert_eq!(full.kind(), ErrorKind::CapacityExhausted);
    assert_eq!((m.len(), m.reserved()), (1, 1));
    assert_eq!(m.key(&b.session), None);
    assert_eq!(m.key(&f.session), Some(key));
    assert_eq!(m.inspect(&f.session).unwrap(), before);
}

#[test]
fn a_shared_key_never_reaches_a_later_session_of_its_slot() {
    let m = shared(None);
    let f = Fence::new(Id::new("s").unwrap(), 0);
    let key = m.open_keyed(f.clone(), OpenOptions::default()).unwrap();
    assert_eq!(key.shard(), m.shard_of(&f.session));
    let _ = m.close(&f, CloseReason::ClientClose).unwrap();
    // The same id again takes the same shard and slot.
    let again = Fence::new(f.session.clone(), 1);
    let later = m.open_keyed(again.clone(), OpenOptions::default()).unwrap();
    assert_eq!(later.in_shard().slot(), key.in_shard().slot());
    assert_ne!(later, key);
    assert!(m.read_at(key, AnySession::kind).is_none());
    assert!(m
        .update_at(key, |s| s.append(&again, InputMode::TurnCommitOnly))
        .is_none());
    assert!(m
        .apply_at(key, |s, now| s.touch(
            &again,
            duplex_core::Activity::Heartbeat,
            now
        ))
        .is_none());
    assert!(m.remove_closed_at(key).is_none());
    assert_eq!(m.inspect(&again.session).unwrap().input_seq, 0);
    assert_eq!(m.read_at(later, AnySession::kind), Some(StateKind::Open));
}

#[test]
fn removing_a_session_that_is_not_closed_is_refused_and_changes_nothing() {
    let m = shared(Some(1));
    let f = Fence::new(Id::new("s").unwrap(), 0);
    let key = m.open_keyed(f.clone(), OpenOptions::default()).unwrap();
    m.update_at(key, |s| s.begin_close(&f, CloseReason::ClientClose))
        .unwrap()
        .unwrap();
    let refused = m.remove_closed_at(key).unwrap().unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::WrongState);
    assert_eq!((m.len(), m.reserved()), (1, 1));
    assert_eq!(m.read_at(key, AnySession::kind), Some(StateKind::Closing));
    // Closed where it sits, then removed: its admission slot is free.
    let released = m.update_at(key, AnySession::finalize).unwrap().unwrap();
    assert!(released.is_empty());
    m.remove_closed_at(key).unwrap().unwrap();
    assert_eq!((m.len(), m.reserved()), (0, 0));
    m.open_keyed(Fence::new(Id::new("t").unwrap(), 0), OpenOptions::default())
        .unwrap();
}

/// Code written once for either manager, through `Host`.
fn one_call(h: &mut impl Host, id: &str) -> usize {
    let f = Fence::new(Id::new(id).unwrap(), 0);
    let key = h.open_keyed(f.clone(), OpenOptions::default()).unwrap();
    h.sessions().bind(&f, 0, "tts-1").unwrap();
    let refused = h
        .close_generation(&f, 9, CloseReason::ClientClose)
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::GenerationMismatch);
    assert_eq!(h.read_at(key, AnySession::kind), Some(StateKind::Open));
    let released = h.close(&f, CloseReason::ClientClose).unwrap().unwrap();
    assert!(h.is_empty());
    released.len()
}

#[test]
fn a_host_written_once_runs_on_either_manager() {
    assert_eq!(one_call(&mut manager(), "a"), 1);
    assert_eq!(one_call(&mut &shared(None), "a"), 1);
}
