//! The metrics a host exports (feature `metrics`), read back through the
//! `metrics` debugging recorder after a scenario whose counts are known.

use duplex_core::{
    Activity, CloseReason, Duration, ErrorKind, Fence, Id, InputMode, Instant, LeaseConfig,
    ManualClock, Modes, OpenOptions,
};
use duplex_std::Sessions as _;
use duplex_std::{ManagerConfig, SessionManager};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

fn id(s: &str) -> Id {
    Id::new(s).expect("test ids are valid")
}

/// `(name, labels "k=v,...", value)` of every metric recorded (these are
/// all whole numbers).
fn read(recorder: &DebuggingRecorder) -> Vec<(String, String, i64)> {
    let mut out: Vec<(String, String, i64)> = recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let value = match value {
                DebugValue::Counter(n) => i64::try_from(n).unwrap_or(i64::MAX),
                DebugValue::Gauge(g) => g.into_inner().round() as i64,
                DebugValue::Histogram(_) => i64::MIN,
            };
            (key.name().to_string(), labels.join(","), value)
        })
        .collect();
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out
}

fn value(metrics: &[(String, String, i64)], name: &str, labels: &str) -> i64 {
    metrics
        .iter()
        .find(|(n, l, _)| n == name && l == labels)
        .map_or(0, |(_, _, v)| *v)
}

#[test]
fn sessions_by_state_refusals_and_expiries_are_counted() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        let clock = ManualClock::new(Instant::ZERO);
        let config = ManagerConfig {
            max_sessions: Some(3),
            ..ManagerConfig::default()
        };
        let mut manager = SessionManager::new(&clock, config).unwrap();
        let lease =
            LeaseConfig::new(Some(Duration::from_secs(10)), Duration::from_secs(1)).unwrap();
        let opts = || {
            OpenOptions::default()
                .modes(Modes::only(InputMode::AppendAudioChunk))
                .lease(lease)
        };
        let (talking, dropped, hung_up, refused) = (
            Fence::new(id("a"), 0),
            Fence::new(id("b"), 0),
            Fence::new(id("c"), 0),
            Fence::new(id("d"), 0),
        );
        let (a, b, c) = (&talking, &dropped, &hung_up);
        for f in [a, b, c] {
            manager.open(f.clone(), opts()).unwrap();
        }
        assert_eq!(
            manager.open(refused.clone(), opts()).unwrap_err().kind(),
            ErrorKind::CapacityExhausted
        );
        // Two stale operations: an old epoch, a wrong resume token.
        manager
            .accept_fence(&talking.clone().with_epoch(1))
            .unwrap();
        assert_eq!(
            manager.touch(a, Activity::Heartbeat).unwrap_err().kind(),
            ErrorKind::FenceMismatch
        );
        manager.detach(b).unwrap();
        assert_eq!(
            manager.resume(b, 7).unwrap_err().kind(),
            ErrorKind::GenerationMismatch
        );
        // b's grace runs out; c is closed by the client.
        clock.advance(Duration::from_secs(1));
        assert_eq!(manager.collect_expired([]).len(), 1);
        let _ = manager.close(c, CloseReason::ClientClose).unwrap();
    });
    let metrics = read(&recorder);
    assert_eq!(
        value(&metrics, "duplex_sessions", "state=open"),
        1,
        "{metrics:?}"
    );
    assert_eq!(value(&metrics, "duplex_sessions", "state=detached"), 0);
    assert_eq!(value(&metrics, "duplex_sessions", "state=closing"), 1);
    assert_eq!(value(&metrics, "duplex_admissions_refused_total", ""), 1);
    assert_eq!(
        value(
            &metrics,
            "duplex_expired_total",
            "reason=disconnect_grace_expired"
        ),
        1,
    );
    assert_eq!(
        value(
            &metrics,
            "duplex_stale_refused_total",
            "kind=fence_mismatch"
        ),
        1,
    );
    assert_eq!(
        value(
            &metrics,
            "duplex_stale_refused_total",
            "kind=generation_mismatch"
        ),
        1,
    );
}
