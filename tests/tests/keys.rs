//! `SessionKey`: a handle that reaches a session without its id's hash
//! while the session is there, and never reaches another session.

use duplex_core::{
    CloseReason, Error as CoreError, ErrorKind, Fence, Id, InputMode, ManualClock, OpenOptions,
    StateKind,
};
use duplex_std::{ManagerConfig, SessionKey, SessionManager, Sessions};

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
