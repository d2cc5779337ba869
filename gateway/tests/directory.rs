//! The Redis session directory against a real `redis-server` (from PATH)
//! and a three-master Redis Cluster: ignored
//! unless run with `--ignored` (`duplex_testkit::stores`).

use duplex_gateway::cluster::{Directory, DirectoryError, Record, RedisTarget, Save};
use duplex_testkit::stores;

fn image(image: &[u8], version: u64) -> Save<'_> {
    Save {
        image,
        version,
        ..Save::default()
    }
}

async fn ownership_is_a_compare_and_set_on_the_incarnation(t: &RedisTarget) {
    let a = Directory::connect_to(t, "a").await.unwrap();
    let b = Directory::connect_to(t, "b").await.unwrap();

    assert!(a.create("s1", 0, image(b"image-0", 1)).await.unwrap());
    assert!(
        !b.create("s1", 0, image(b"other", 1)).await.unwrap(),
        "an id with a record is taken"
    );
    let rec = b.load("s1").await.unwrap().unwrap();
    assert_eq!(
        (rec.node.as_str(), rec.incarnation, rec.image.as_slice()),
        ("a", 0, &b"image-0"[..])
    );

    // The owner saves; nobody else can, and not under another incarnation.
    a.save("s1", 0, image(b"image-1", 2)).await.unwrap();
    assert!(matches!(
        b.save("s1", 0, image(b"evil", 3)).await,
        Err(DirectoryError::Lost { .. })
    ));
    // A later incarnation than the record's comes only from a takeover the
    // store lost: told as a lost record (the caller writes back, fenced by
    // incarnation), and nothing is written.
    assert!(matches!(
        a.save("s1", 1, image(b"evil", 3)).await,
        Err(DirectoryError::Missing { .. })
    ));
    assert_eq!(a.load("s1").await.unwrap().unwrap().image, b"image-1");
    // An image older than the stored one is not written (saves of one
    // session may arrive out of order).
    a.save("s1", 0, image(b"older", 1)).await.unwrap();
    assert_eq!(a.load("s1").await.unwrap().unwrap().image, b"image-1");

    // A takeover names the incarnation and image it read: one that read
    // before the owner's last change must read again.
    let stale = b.load("s1").await.unwrap().unwrap();
    a.save("s1", 0, image(b"image-2", 4)).await.unwrap();
    match b.take_over("s1", &stale, image(b"image-b", 1)).await {
        Err(DirectoryError::Raced {
            expected: 0,
            found: 0,
            ..
        }) => {}
        other => panic!("expected a stale read refused, got {other:?}"),
    }
    // B takes over from incarnation 0: A's writes are refused from now on.
    let read = b.load("s1").await.unwrap().unwrap();
    assert_eq!(read.version, 4);
    assert_eq!(
        b.take_over("s1", &read, image(b"image-b", 1))
            .await
            .unwrap()
            .incarnation,
        1
    );
    let late = ["0:9:late".to_owned()];
    let late = Save {
        applied: &late,
        ..image(b"late", 9)
    };
    assert!(matches!(
        a.save("s1", 0, late).await,
        Err(DirectoryError::Lost { incarnation: 0, .. })
    ));
    assert!(
        a.applied("s1", 0, 10).await.unwrap().is_empty(),
        "a refused save appends nothing"
    );
    let rec = a.load("s1").await.unwrap().unwrap();
    assert_eq!(
        (rec.node.as_str(), rec.incarnation, rec.image.as_slice()),
        ("b", 1, &b"image-b"[..])
    );

    // A second takeover from the same incarnation lost the race.
    match a.take_over("s1", &read, image(b"again", 1)).await {
        Err(DirectoryError::Raced {
            expected: 0,
            found: 1,
            ..
        }) => {}
        other => panic!("expected a lost race, got {other:?}"),
    }
    // Closing is the owner's too; then a takeover finds nothing.
    assert!(matches!(
        a.close("s1", 1, Save::default()).await,
        Err(DirectoryError::Lost { .. })
    ));
    b.close("s1", 1, Save::default()).await.unwrap();
    assert!(b.load("s1").await.unwrap().is_none());
    let read = Record {
        incarnation: 1,
        ..read
    };
    match a.take_over("s1", &read, image(b"x", 1)).await {
        Err(DirectoryError::Raced {
            found: u64::MAX, ..
        }) => {}
        other => panic!("expected no record, got {other:?}"),
    }
}

async fn one_of_many_concurrent_takeovers_wins(t: &RedisTarget) {
    let owner = Directory::connect_to(t, "owner").await.unwrap();
    assert!(owner.create("contested", 4, image(b"i", 1)).await.unwrap());
    let read = owner.load("contested").await.unwrap().unwrap();
    let mut tasks = Vec::new();
    for n in 0..16 {
        let d = Directory::connect_to(t, format!("n{n}")).await.unwrap();
        let read = read.clone();
        tasks.push(tokio::spawn(async move {
            d.take_over("contested", &read, image(b"mine", 1))
                .await
                .map(|taken| taken.incarnation)
        }));
    }
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(5) => won += 1,
            Err(DirectoryError::Raced { found: 5, .. }) => {}
            other => panic!("unexpected takeover outcome {other:?}"),
        }
    }
    assert_eq!(won, 1);
}

async fn saves_log_applied_input_in_order_and_count_each_release(t: &RedisTarget) {
    let a = Directory::connect_to(t, "a").await.unwrap();
    let b = Directory::connect_to(t, "b").await.unwrap();
    let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let (e12, e3) = (strings(&["0:1:e1", "0:2:e2"]), strings(&["0:3:e3"]));
    let (r12, r1, r3) = (strings(&["r1", "r2"]), strings(&["r1"]), strings(&["r3"]));
    assert!(a
        .create(
            "s",
            0,
            Save {
                applied: &e12,
                bound: &r12,
                ..image(b"1", 1)
            }
        )
        .await
        .unwrap());
    let counts = a
        .save(
            "s",
            0,
            Save {
                applied: &e3,
                released: &r12,
                ..image(b"2", 2)
            },
        )
        .await
        .unwrap();
    assert_eq!(counts, [1, 1]);
    // A release sent again by its releaser (a save whose answer was lost)
    // is counted once; a release by another releaser is counted, so a
    // double release is visible.
    let again = |version| Save {
        released: &r1,
        ..image(b"3", version)
    };
    assert_eq!(a.save("s", 0, again(3)).await.unwrap(), [1]);
    assert_eq!(
        a.applied("s", 0, 10).await.unwrap(),
        ["0:1:e1", "0:2:e2", "0:3:e3"]
    );
    assert_eq!(a.applied("s", 1, 1).await.unwrap(), ["0:2:e2"]);
    assert!(a.applied("s", 0, 0).await.unwrap().is_empty());
    // A takeover releases what the previous owner's engine held; a bound
    // request nobody releases stays at 0.
    a.save(
        "s",
        0,
        Save {
            bound: &r3,
            ..image(b"4", 4)
        },
    )
    .await
    .unwrap();
    let read = b.load("s").await.unwrap().unwrap();
    let taken = b
        .take_over(
            "s",
            &read,
            Save {
                released: &[r3[0].clone(), r1[0].clone()],
                ..image(b"5", 1)
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (taken.incarnation, taken.counts.as_slice()),
        (1, &[1, 2][..])
    );
    // The takeover's answer carries what the store holds of the session
    // after it: the log, and every request's count.
    assert_eq!(taken.applied, ["0:1:e1", "0:2:e2", "0:3:e3"]);
    let mut releases = taken.releases.clone();
    releases.sort();
    let mut stored = b.releases("s").await.unwrap();
    stored.sort();
    assert_eq!(releases, stored);
    assert!(releases.contains(&(r3[0].clone(), 1)));
    b.save(
        "s",
        1,
        Save {
            bound: &strings(&["r4"]),
            ..image(b"6", 2)
        },
    )
    .await
    .unwrap();
    let mut releases = b.releases("s").await.unwrap();
    releases.sort();
    assert_eq!(
        releases,
        [
            ("r1".into(), 2),
            ("r2".into(), 1),
            ("r3".into(), 1),
            ("r4".into(), 0)
        ]
    );
}

async fn nodes_register_and_note_what_they_own(t: &RedisTarget) {
    let a = Directory::connect_to(t, "a").await.unwrap();
    let b = Directory::connect_to(t, "b").await.unwrap();
    a.register().await.unwrap();
    b.register().await.unwrap();
    a.own("s1").await.unwrap();
    a.own("s2").await.unwrap();
    a.disown("s1").await.unwrap();
    assert_eq!(b.owned_by("a").await.unwrap(), ["s2"]);
    let mut nodes = b.nodes().await.unwrap();
    nodes.sort();
    assert_eq!(nodes, ["a", "b"]);
    b.forget("a").await.unwrap();
    assert_eq!(b.nodes().await.unwrap(), ["b"]);
    assert!(b.owned_by("a").await.unwrap().is_empty());
    // A node forgotten while it was only slow registers again with its
    // next announcement, so its sessions can still be adopted later.
    a.heartbeat(std::time::Duration::from_secs(5))
        .await
        .unwrap();
    let mut nodes = b.nodes().await.unwrap();
    nodes.sort();
    assert_eq!(nodes, ["a", "b"]);
}

async fn liveness_lasts_for_its_ttl(t: &RedisTarget) {
    let a = Directory::connect_to(t, "a").await.unwrap();
    assert!(!a.is_live("a").await.unwrap());
    a.heartbeat(std::time::Duration::from_millis(150))
        .await
        .unwrap();
    assert!(a.is_live("a").await.unwrap());
    assert_eq!(a.node(), "a");
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(
        !a.is_live("a").await.unwrap(),
        "a node that stops announcing is presumed dead"
    );
}

/// A realtime session's stored journal: appends and trims fenced by the
/// owner, and a trim that never loses the journal's position (a takeover
/// after the client acknowledged everything continues the numbering).
async fn the_journal_keeps_its_position(t: &RedisTarget) {
    let a = Directory::connect_to(t, "a").await.unwrap();
    let b = Directory::connect_to(t, "b").await.unwrap();
    assert!(a.create("j1", 0, image(b"v1", 1)).await.unwrap());
    a.journal_append("j1", 0, &[(1, "{}"), (2, "{}"), (3, "{}")])
        .await
        .unwrap();
    assert!(matches!(
        b.journal_append("j1", 0, &[(4, "{}")]).await,
        Err(DirectoryError::Lost { .. })
    ));
    a.journal_trim("j1", 0, 2).await.unwrap();
    let seqs = |j: Vec<(u64, String)>| j.into_iter().map(|(s, _)| s).collect::<Vec<_>>();
    assert_eq!(seqs(b.journal("j1").await.unwrap()), [3]);
    // Everything acknowledged: the newest entry stays, with its number.
    a.journal_trim("j1", 0, 3).await.unwrap();
    assert_eq!(seqs(b.journal("j1").await.unwrap()), [3]);
    a.journal_append("j1", 0, &[(4, "{}")]).await.unwrap();
    a.journal_trim("j1", 0, 10).await.unwrap();
    assert_eq!(seqs(b.journal("j1").await.unwrap()), [4]);
}

#[tokio::test]
#[ignore = "needs redis-server"]
async fn a_malformed_record_is_named() {
    let server = stores::server();
    let a = Directory::connect(&server.url(), "a").await.unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let () = redis::cmd("HSET")
        .arg("dx:{odd}:rec")
        .arg("node")
        .arg("a")
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(matches!(
        a.load("odd").await,
        Err(DirectoryError::Malformed { .. })
    ));
}

duplex_testkit::on_every_store!(
    ownership_is_a_compare_and_set_on_the_incarnation,
    one_of_many_concurrent_takeovers_wins,
    saves_log_applied_input_in_order_and_count_each_release,
    nodes_register_and_note_what_they_own,
    liveness_lasts_for_its_ttl,
    the_journal_keeps_its_position,
);
