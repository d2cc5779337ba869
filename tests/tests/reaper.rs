//! The reaper drivers: a tokio task on paused time finalizes each expired
//! session within 5 ms of its deadline, sleeps (without waking) while
//! nothing is due, and shuts down cleanly; the thread driver does the same
//! on the real clock.

use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use duplex_core::{
    Clock, CloseReason, Duration, Fence, Id, InputMode, Instant, LeaseConfig, Modes, OpenOptions,
};
use duplex_std::Sessions as _;
use duplex_std::{ManagerConfig, MonotonicClock, SharedManager, TokioClock};

const GRACE_MS: u64 = 50;

fn id(s: &str) -> Id {
    Id::new(s).expect("test ids are valid")
}

fn options() -> OpenOptions {
    let lease = LeaseConfig::new(None, Duration::from_millis(GRACE_MS)).expect("valid lease");
    OpenOptions::default()
        .modes(Modes::only(InputMode::AppendAudioChunk))
        .lease(lease)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_tokio_reaper_finalizes_each_session_on_time_and_sleeps_otherwise() {
    const SESSIONS: u64 = 1_000;
    let m = Arc::new(
        SharedManager::with_shards(TokioClock::new(), ManagerConfig::default(), 8).unwrap(),
    );
    // (session, lateness in ms) for each session the reaper handed over.
    let handled: Arc<Mutex<Vec<(String, u64)>>> = Arc::new(Mutex::new(Vec::new()));
    let detached_at: Arc<Mutex<std::collections::HashMap<String, u64>>> = Arc::default();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let reaper = {
        let (m2, handled, detached_at) = (
            Arc::clone(&m),
            Arc::clone(&handled),
            Arc::clone(&detached_at),
        );
        tokio::spawn(Arc::clone(&m).reap(
            move |expiry| {
                let now = m2.clock().now().as_millis();
                let deadline = detached_at.lock().unwrap()[expiry.session.as_str()] + GRACE_MS;
                assert!(
                    now >= deadline,
                    "{} expired before its deadline",
                    expiry.session
                );
                handled
                    .lock()
                    .unwrap()
                    .push((expiry.session.to_string(), now - deadline));
            },
            async {
                let _ = stopped.await;
            },
        ))
    };
    // Sessions detach 1 ms apart; some are touched first, so their idle
    // deadline never matters (no idle TTL), only the grace.
    for i in 0..SESSIONS {
        let f = Fence::new(id(&format!("call-{i}")), 0);
        m.open(f.clone(), options()).unwrap();
        m.detach(&f).unwrap();
        detached_at
            .lock()
            .unwrap()
            .insert(f.session.to_string(), m.clock().now().as_millis());
        tokio::time::sleep(StdDuration::from_millis(1)).await;
    }
    // A session that resumes in time is not reaped.
    let kept = Fence::new(id("kept"), 0);
    m.open(kept.clone(), options()).unwrap();
    m.detach(&kept).unwrap();
    m.resume(&kept, 0).unwrap();
    tokio::time::sleep(StdDuration::from_millis(GRACE_MS + 10)).await;
    stop.send(()).unwrap();
    let stats = reaper.await.unwrap();

    let handled = std::mem::take(&mut *handled.lock().unwrap());
    assert_eq!(handled.len() as u64, SESSIONS);
    let latest = handled.iter().map(|(_, late)| *late).max().unwrap();
    assert!(
        latest <= 5,
        "a session was finalized {latest} ms after its deadline"
    );
    assert_eq!((stats.expired, stats.finalized), (SESSIONS, SESSIONS));
    assert_eq!(stats.idle_wakes, 0, "woke on a deadline with nothing due");
    assert_eq!(m.len(), 1, "only the resumed session is left");

    // On a table with nothing due, a reaper sleeps: an idle hour, no wake.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let idle = tokio::spawn(Arc::clone(&m).reap(|_| panic!("nothing is due"), async {
        let _ = stopped.await;
    }));
    tokio::time::sleep(StdDuration::from_secs(3_600)).await;
    stop.send(()).unwrap();
    let stats = idle.await.unwrap();
    assert_eq!(
        stats,
        duplex_std::ReaperStats::default(),
        "an idle reaper never woke"
    );
    let _ = m.close(&kept, CloseReason::ExplicitClose).unwrap();
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_earlier_deadline_wakes_a_sleeping_reaper() {
    let m = Arc::new(SharedManager::new(TokioClock::new(), ManagerConfig::default()).unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let reaper = tokio::spawn(Arc::clone(&m).reap(|_| {}, async {
        let _ = stopped.await;
    }));
    // The reaper sleeps toward a deadline an hour away...
    let far = Fence::new(id("far"), 0);
    m.open(
        far.clone(),
        OpenOptions::default().lease(LeaseConfig::new(None, Duration::from_secs(3_600)).unwrap()),
    )
    .unwrap();
    m.detach(&far).unwrap();
    tokio::time::sleep(StdDuration::from_millis(10)).await;
    // ...and an earlier one appears.
    let near = Fence::new(id("near"), 0);
    m.open(near.clone(), options()).unwrap();
    m.detach(&near).unwrap();
    tokio::time::sleep(StdDuration::from_millis(GRACE_MS + 5)).await;
    assert!(
        m.inspect(&near.session).is_none(),
        "the near session was reaped on time"
    );
    assert!(m.inspect(&far.session).is_some());
    stop.send(()).unwrap();
    let stats = reaper.await.unwrap();
    assert_eq!((stats.finalized, stats.idle_wakes), (1, 0));
}

#[test]
fn the_thread_reaper_reaps_and_shuts_down() {
    let m = Arc::new(
        SharedManager::with_shards(MonotonicClock::new(), ManagerConfig::default(), 4).unwrap(),
    );
    let handled = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&handled);
    let reaper = m
        .spawn_reaper(move |expiry| log.lock().unwrap().push(expiry.session.to_string()))
        .unwrap();
    for i in 0..20 {
        let f = Fence::new(id(&format!("t{i}")), 0);
        m.open(f.clone(), options()).unwrap();
        m.bind(&f, 0, format!("req-{i}")).unwrap();
        m.detach(&f).unwrap();
    }
    let start = std::time::Instant::now();
    while !m.is_empty() && start.elapsed() < StdDuration::from_secs(10) {
        std::thread::sleep(StdDuration::from_millis(5));
    }
    let stats = reaper.shutdown();
    assert!(m.is_empty(), "every detached session was reaped");
    assert_eq!(handled.lock().unwrap().len(), 20);
    assert_eq!((stats.expired, stats.finalized), (20, 20));
    assert_eq!(m.reserved(), 0);
    let _ = Instant::ZERO;
}

/// A host's connection task: admit, then two awaits (engine warm-up and
/// handshake), then open.
async fn connection(
    m: Arc<SharedManager<TokioClock>>,
    name: String,
) -> Result<(), duplex_std::Error> {
    let permit = m.admit()?;
    tokio::time::sleep(StdDuration::from_millis(10)).await; // warm-up
    tokio::time::sleep(StdDuration::from_millis(10)).await; // handshake
    permit.open(Fence::new(id(&name), 0), options())
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn aborting_a_connection_task_at_any_await_gives_its_slot_back() {
    let config = ManagerConfig {
        max_sessions: Some(1),
        ..ManagerConfig::default()
    };
    let m = Arc::new(SharedManager::new(TokioClock::new(), config).unwrap());
    // Abort before it runs, during the warm-up, during the handshake.
    for (k, run_for_ms) in [0_u64, 5, 15].into_iter().enumerate() {
        let task = tokio::spawn(connection(Arc::clone(&m), format!("call-{k}")));
        if run_for_ms > 0 {
            tokio::time::sleep(StdDuration::from_millis(run_for_ms)).await;
            assert_eq!(m.reserved(), 1, "the task holds its permit while it waits");
        }
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
        assert_eq!(
            (m.reserved(), m.len()),
            (0, 0),
            "aborted after {run_for_ms} ms"
        );
    }
    // Admission is whole again: a task that runs to the end opens.
    tokio::spawn(connection(Arc::clone(&m), "call-done".into()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((m.reserved(), m.len()), (1, 1));
}
