//! Steady-state session operations do not allocate: measured with a
//! counting global allocator (allocation-counter installs it for this test
//! binary; counts are per thread, so parallel tests do not interfere).

use allocation_counter::measure;
use duplex_core::profile::server;
use duplex_core::profile::Server;
use duplex_core::storage::Heap;
use duplex_core::{
    Activity, AnySession, Fence, Finality, Id, InputMode, Instant, ManualClock, Modes, OpenOptions,
    Session,
};
use duplex_std::Sessions as _;
use duplex_std::{ManagerConfig, SessionManager};

const AUDIO: InputMode = InputMode::AppendAudioChunk;

fn id(s: &str) -> Id {
    Id::new(s).expect("valid id")
}

/// A manager holding 1,000 open sessions, and their fences.
fn thousand_sessions(clock: &ManualClock) -> (SessionManager<&ManualClock>, Vec<Fence>) {
    let mut m = SessionManager::new(clock, ManagerConfig::default()).unwrap();
    let fences: Vec<Fence> = (0..1_000)
        .map(|i| Fence::new(id(&format!("s{i}")), 0))
        .collect();
    for f in &fences {
        m.open(f.clone(), OpenOptions::default().modes(Modes::only(AUDIO)))
            .unwrap();
    }
    (m, fences)
}

#[test]
fn typed_session_operations_do_not_allocate() {
    let f0 = Fence::new(id("s"), 0);
    let (r0, r1, op) = (id("req-0"), id("req-1"), id("op-1"));
    let mut s = Session::open(
        f0.clone(),
        OpenOptions::default().modes(Modes::only(AUDIO)),
        Instant::ZERO,
    )
    .unwrap();
    let info = measure(|| {
        for epoch in 0..100u64 {
            let f = f0.clone().with_epoch(epoch);
            let next = f.clone().with_epoch(epoch + 1);
            s.append(&f, AUDIO).unwrap();
            let r = s.prepare_append(&f, AUDIO).unwrap();
            s.commit_append(&r).unwrap();
            s.touch(&f, Activity::Heartbeat, Instant::from_millis(epoch))
                .unwrap();
            s.bind(&f, 0, &r0).unwrap();
            s.bind(&f, 1, &r1).unwrap();
            s.release(std::slice::from_ref(&r1));
            s.record_completed(&f, &op, AUDIO, Finality::Partial, &[1, 2])
                .unwrap();
            assert!(s
                .completed(&f, &op, AUDIO, Finality::Partial)
                .unwrap()
                .is_some());
            assert_eq!(s.cancel(&f, &next).unwrap().len(), 1);
            assert_eq!(s.due(Instant::from_millis(epoch)), None);
        }
    });
    assert_eq!(info.count_total, 0, "{info:?}");
}

#[test]
fn manager_steady_state_does_not_allocate() {
    let clock = ManualClock::new(Instant::ZERO);
    let (mut m, fences) = thousand_sessions(&clock);
    // Warm up once so lazily sized scratch space (the reaper's list of
    // excluded sessions) exists.
    assert!(m.collect_expired([&fences[0].session]).is_empty());
    let info = measure(|| {
        for (i, f0) in fences.iter().enumerate() {
            let f = f0.clone().with_epoch(1);
            let next = f.clone().with_epoch(2);
            m.append(&f, AUDIO).unwrap();
            m.touch(&f, Activity::ModelOutput).unwrap();
            m.bind(&f, 0, "llm").unwrap();
            m.bind(&f, 1, "tts").unwrap();
            m.release(&f.session, &["tts"]).unwrap();
            let result = i64::try_from(i).unwrap();
            m.record_completed(&f, "chunk", AUDIO, Finality::Partial, &[result])
                .unwrap();
            assert!(m
                .completed(&f, "chunk", AUDIO, Finality::Partial)
                .unwrap()
                .is_some());
            let cancelled = m.cancel(&f, &next).unwrap();
            assert_eq!(cancelled.len(), 1);
            // The ids the manager hands out go straight back in.
            m.release(&f.session, &cancelled).unwrap();
            assert!(m.collect_expired([&f.session]).is_empty());
        }
        assert!(m.next_deadline().is_some());
    });
    assert_eq!(info.count_total, 0, "{info:?}");
}

#[test]
fn keyed_access_does_not_allocate() {
    // The Python package's path: a SessionKey per session, the operations
    // through the manager's books.
    let clock = ManualClock::new(Instant::ZERO);
    let (mut m, fences) = thousand_sessions(&clock);
    let keys: Vec<_> = fences.iter().map(|f| m.key(&f.session).unwrap()).collect();
    let llm = id("llm");
    let info = measure(|| {
        for (f, &key) in fences.iter().zip(&keys) {
            m.update_at(key, |s| s.append(f, AUDIO)).unwrap().unwrap();
            m.apply_at(key, |s, now| s.touch(f, Activity::ModelOutput, now))
                .unwrap()
                .unwrap();
            m.update_at(key, |s| s.bind(f, 0, &llm)).unwrap().unwrap();
            assert_eq!(m.get_at(key).unwrap().lease_generation(), 0);
            let released = m.update_at(key, AnySession::release_all).unwrap().unwrap();
            assert_eq!(released.len(), 1);
        }
        assert!(m.collect_expired([]).is_empty());
    });
    assert_eq!(info.count_total, 0, "{info:?}");
}

#[test]
fn the_counter_sees_allocations() {
    // Guards the tests above against a counter that counts nothing.
    let info = measure(|| {
        let v: Vec<u8> = Vec::with_capacity(64);
        std::hint::black_box(v);
    });
    assert_eq!(info.count_total, 1);
}

/// The server profile with heap storage: the Python package's sessions.
type HeapServer<'c> = SessionManager<&'c ManualClock, Server<(), (), Heap>>;

fn server_id(s: &str) -> Id<{ server::ID_LEN }> {
    Id::new(s).expect("valid id")
}

/// Allocations `f` makes, per call, over `n` calls.
fn per_call(n: u64, mut f: impl FnMut(u64)) -> u64 {
    let info = measure(|| (0..n).for_each(&mut f));
    info.count_total / n
}

#[test]
fn heap_sessions_allocate_only_to_store_an_id_or_grow_a_table() {
    // What BENCHMARKS.md states per operation for Heap storage.
    let clock = ManualClock::new(Instant::ZERO);
    let mut m = HeapServer::with_capacities(&clock, ManagerConfig::default()).unwrap();
    let long = "session-6f1c2a9e-6a3b-4f0e-9a57-2d8c1e4b7f30-control-plane-duplex-00";
    let f = Fence::new(server_id(long), 0);
    let key = m
        .open_keyed(f.clone(), OpenOptions::default().modes(Modes::only(AUDIO)))
        .unwrap();
    let (llm, tts) = (
        server_id("llm-request-6a3b-4f0e"),
        server_id("tts-request-6a3b-4f0e"),
    );
    // First use of each table: its columns are made (four for resources,
    // five for completed appends, one for active operations) with the id.
    let first_bind = per_call(1, |_| {
        m.update_at(key, |s| s.bind(&f, 0, &llm)).unwrap().unwrap()
    });
    assert_eq!(first_bind, 5);
    let op = |k: u64| server_id(&format!("append-{k:04}"));
    let ops: Vec<_> = (0..600).map(op).collect();
    let first_record = per_call(1, |_| {
        m.update_at(key, |s| {
            s.record_completed(&f, &ops[0], AUDIO, Finality::Partial, &[0])
        })
        .unwrap()
        .unwrap();
    });
    assert_eq!(first_record, 6);
    // Fill the window to its limit (256): the columns grow by doubling.
    for op in &ops[1..256] {
        m.update_at(key, |s| {
            s.record_completed(&f, op, AUDIO, Finality::Partial, &[0])
        })
        .unwrap()
        .unwrap();
    }
    // Steady state: nothing allocates but storing a new id.
    assert_eq!(
        per_call(1_000, |_| m
            .update_at(key, |s| s.append(&f, AUDIO))
            .unwrap()
            .map(drop)
            .unwrap()),
        0
    );
    assert_eq!(
        per_call(1_000, |_| m
            .apply_at(key, |s, now| s.touch(&f, Activity::ModelOutput, now))
            .unwrap()
            .unwrap()),
        0
    );
    assert_eq!(
        per_call(1_000, |k| assert!(m
            .get_at(key)
            .unwrap()
            .completed(
                &f,
                &ops[usize::try_from(k % 256).unwrap()],
                AUDIO,
                Finality::Partial
            )
            .unwrap()
            .is_some())),
        0
    );
    assert_eq!(per_call(1_000, |_| assert!(m.get(&f.session).is_some())), 0);
    // A new op id at the limit: its id is stored, the oldest one's freed.
    let mut next = 256;
    assert_eq!(
        per_call(300, |_| {
            m.update_at(key, |s| {
                s.record_completed(&f, &ops[next], AUDIO, Finality::Partial, &[0])
            })
            .unwrap()
            .unwrap();
            next += 1;
        }),
        1
    );
    // A new request: its id; releasing it frees it.
    assert_eq!(
        per_call(1, |_| m
            .update_at(key, |s| s.bind(&f, 1, &tts))
            .unwrap()
            .unwrap()),
        1
    );
    assert_eq!(
        per_call(1, |_| m
            .release(&f.session, std::slice::from_ref(&tts))
            .unwrap()),
        0
    );
}
