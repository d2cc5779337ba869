//! The directory over a replicated store, against real processes (ignored
//! unless run with `--ignored`: `duplex_testkit::stores`): a primary with two
//! replicas under three Sentinels. A node follows a failover without a
//! restart and loses nothing it acknowledged in the `replicated` mode; a
//! change no replica confirms is not acknowledged; one `WAIT` confirms
//! many writes.

use std::time::Duration;

use duplex_gateway::cluster::{Directory, DirectoryError, Durability, RedisTarget, Save};
use duplex_testkit::stores;

const REPLICATED: Durability = Durability::Replicated {
    replicas: 1,
    timeout: Duration::from_millis(300),
};

/// Commands of `name` the server on `port` has run (`INFO commandstats`).
async fn calls(port: u16, name: &str) -> u64 {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut c)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `op` until it succeeds, for up to 20 s; the failures seen on the way.
async fn until_ok<T, F: std::future::Future<Output = Result<T, DirectoryError>>>(
    mut op: impl FnMut() -> F,
) -> (T, Vec<String>) {
    let mut failures = Vec::new();
    let give_up = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match op().await {
            Ok(v) => return (v, failures),
            Err(e) => {
                assert!(
                    tokio::time::Instant::now() < give_up,
                    "still failing after 20 s: {e} (before: {failures:?})"
                );
                failures.push(e.to_string());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server"]
async fn a_node_follows_a_failover_and_keeps_every_acknowledged_change() {
    let mut redis = stores::sentinel(1);
    let target = redis.target();
    assert!(matches!(target, RedisTarget::Sentinel { .. }));
    let node = Directory::connect_with(&target, "a", REPLICATED)
        .await
        .unwrap();
    let bound = vec!["r1".to_owned()];
    let first = Save {
        bound: &bound,
        ..Save::default()
    };
    assert!(node.create("s", 0, first).await.unwrap());
    let mut acknowledged = Vec::new();
    for i in 1..=50u64 {
        let entry = vec![format!("0:{i}:c{i}")];
        let save = Save {
            image: b"img",
            version: i,
            applied: &entry,
            base: Some(i - 1),
            ..Save::default()
        };
        node.save("s", 0, save).await.unwrap();
        acknowledged.push(entry[0].clone());
    }

    let before = redis.primary_port().unwrap();
    let killed = redis.kill_primary().unwrap();
    // The same Directory, not reconnected by the test: its next write
    // fails while no primary answers, then reaches the promoted replica.
    let entry = vec!["0:51:c51".to_owned()];
    let save = Save {
        image: b"img",
        version: 51,
        applied: &entry,
        base: Some(50),
        ..Save::default()
    };
    let (_, failures) = until_ok(|| node.save("s", 0, save)).await;
    acknowledged.push(entry[0].clone());
    redis.await_failover(killed).unwrap();
    assert_ne!(redis.primary_port().unwrap(), before);
    assert!(
        !failures.is_empty(),
        "the primary was killed, yet no write failed"
    );
    // Every change acknowledged before and after the failover is there,
    // once, in order.
    assert_eq!(node.applied_log("s").await.unwrap(), acknowledged);
    let record = node.load("s").await.unwrap().expect("the record survived");
    assert_eq!((record.node.as_str(), record.version), ("a", 51));
    // The whole-directory scans reach the new primary.
    assert_eq!(node.records().await.unwrap(), 1);
    assert_eq!(node.release_tally().await.unwrap().bound, 1);

    // A node that joins now finds the same.
    let late = Directory::connect_to(&target, "b").await.unwrap();
    assert_eq!(late.applied_log("s").await.unwrap(), acknowledged);
    assert_eq!(late.release_tally().await.unwrap().bound, 1);
}

#[tokio::test]
#[ignore = "needs redis-server"]
async fn a_change_no_replica_confirms_is_not_acknowledged() {
    // A lone server has no replica: WAIT counts none.
    let server = stores::server();
    let target = RedisTarget::Server(server.url());
    let replicated = Directory::connect_with(&target, "a", REPLICATED)
        .await
        .unwrap();
    let refused = replicated.create("s", 0, Save::default()).await;
    assert!(
        matches!(
            refused,
            Err(DirectoryError::Unreplicated {
                acked: 0,
                wanted: 1
            })
        ),
        "{refused:?}"
    );
    // The same write in the `ack` mode is acknowledged by the primary.
    let ack = Directory::connect_to(&target, "b").await.unwrap();
    assert!(ack.create("t", 0, Save::default()).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server"]
async fn one_wait_confirms_many_writes() {
    let redis = stores::sentinel(1);
    let node = Directory::connect_with(&redis.target(), "a", REPLICATED)
        .await
        .unwrap();
    let sessions: Vec<String> = (0..200).map(|i| format!("s{i}")).collect();
    let created =
        futures_util::future::join_all(sessions.iter().map(|s| node.create(s, 0, Save::default())))
            .await;
    assert!(created.iter().all(|c| matches!(c, Ok(true))), "{created:?}");
    let primary = redis.primary_port().unwrap();
    let waits = calls(primary, "wait").await;
    assert!(waits >= 1, "no WAIT was sent");
    assert!(
        waits < 100,
        "{waits} WAITs for 200 concurrent writes: not grouped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server"]
async fn a_node_follows_a_cluster_failover_sees_a_new_term_and_keeps_every_acknowledged_change() {
    let mut redis = stores::cluster(1, 1);
    let target = RedisTarget::Cluster(redis.urls());
    let node = Directory::connect_with(&target, "a", REPLICATED)
        .await
        .unwrap();
    let generation = node.generation("g1").await.unwrap();
    assert!(
        generation.starts_with("g1@"),
        "a cluster's generation names its masters' terms: {generation}"
    );
    assert_eq!(
        node.generation("g2").await.unwrap(),
        generation,
        "nothing failed: the same generation"
    );
    // Sessions spread over the three masters' slots by their ids.
    let sessions: Vec<String> = (0..12).map(|i| format!("s{i}")).collect();
    let mut acknowledged: Vec<Vec<String>> = vec![Vec::new(); sessions.len()];
    let bound = vec!["r1".to_owned()];
    for id in &sessions {
        let first = Save {
            bound: &bound,
            ..Save::default()
        };
        // Right after the cluster forms, a replica may confirm a first
        // write late: the create is sent again until confirmed (a create
        // that was applied but not confirmed answers `false` then).
        until_ok(|| node.create(id, 0, first)).await;
    }
    let save_next = |i: usize, n: u64| {
        let node = &node;
        let id = sessions[i].clone();
        async move {
            let entry = vec![format!("0:{n}:c{n}")];
            let save = Save {
                image: b"img",
                version: n,
                applied: &entry,
                base: Some(n - 1),
                ..Save::default()
            };
            let (_, failures) = until_ok(|| node.save(&id, 0, save)).await;
            (entry[0].clone(), failures)
        }
    };
    for n in 1..=10u64 {
        for (i, log) in acknowledged.iter_mut().enumerate() {
            log.push(save_next(i, n).await.0);
        }
    }

    let killed = redis.kill_master(0).unwrap();
    // The same Directory, not reconnected by the test: the writes to the
    // killed master's slots fail until its replica is promoted and (each
    // server refusing writes without a replica) the killed one is back as
    // the new master's replica, which the failover's wait brings about
    // meanwhile.
    let failover = tokio::task::spawn_blocking(move || {
        let took = redis.await_failover(killed);
        (redis, took)
    });
    let mut failed = 0;
    for (i, log) in acknowledged.iter_mut().enumerate() {
        let (entry, failures) = save_next(i, 11).await;
        failed += failures.len();
        log.push(entry);
    }
    let (_redis, took) = failover.await.unwrap();
    took.unwrap();
    assert!(failed > 0, "a master was killed, yet no write failed");

    // The promotion drew a new term: a new generation, though the
    // generation key itself survived on the replica.
    let (after, _) = until_ok(|| node.generation("g3")).await;
    assert_ne!(after, generation, "a promotion is a new generation");
    assert!(after.starts_with("g1@"), "{after}");
    // Every change acknowledged before and after the failover is there,
    // once, in order, and the whole-directory scans reach the new master.
    for (id, log) in sessions.iter().zip(&acknowledged) {
        assert_eq!(&node.applied_log(id).await.unwrap(), log, "{id}");
    }
    let (records, _) = until_ok(|| node.records()).await;
    assert_eq!(records, sessions.len());
    let (tally, _) = until_ok(|| node.release_tally()).await;
    assert_eq!(tally.bound, sessions.len() as u64);
}
