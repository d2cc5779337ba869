//! The Redis session directory against a real `redis-server` (from PATH;
//! skipped with a message when there is none, unless
//! `DUPLEX_REQUIRE_REDIS=1`, which CI sets).

use duplex_gateway::cluster::{Directory, DirectoryError, RedisServer, Save};

fn redis() -> Option<RedisServer> {
    if !RedisServer::available() {
        assert!(
            std::env::var_os("DUPLEX_REQUIRE_REDIS").is_none(),
            "DUPLEX_REQUIRE_REDIS is set but redis-server is not on PATH"
        );
        eprintln!("skipped: redis-server is not on PATH (apt-get install redis-server)");
        return None;
    }
    Some(RedisServer::start().expect("redis-server starts"))
}

fn save<'a>(image: &'a [u8], applied: &'a [String], released: &'a [String]) -> Save<'a> {
    Save {
        image,
        applied,
        released,
    }
}

#[tokio::test]
async fn ownership_is_a_compare_and_set_on_the_incarnation() {
    let Some(server) = redis() else { return };
    let a = Directory::connect(&server.url(), "a").await.unwrap();
    let b = Directory::connect(&server.url(), "b").await.unwrap();

    assert!(a.create("s1", 0, b"image-0").await.unwrap());
    assert!(
        !b.create("s1", 0, b"other").await.unwrap(),
        "an id with a record is taken"
    );
    let rec = b.load("s1").await.unwrap().unwrap();
    assert_eq!(
        (rec.node.as_str(), rec.incarnation, rec.image.as_slice()),
        ("a", 0, &b"image-0"[..])
    );

    // The owner saves; nobody else can, and not under another incarnation.
    a.save("s1", 0, save(b"image-1", &[], &[])).await.unwrap();
    assert!(matches!(
        b.save("s1", 0, save(b"evil", &[], &[])).await,
        Err(DirectoryError::Lost { .. })
    ));
    assert!(matches!(
        a.save("s1", 1, save(b"evil", &[], &[])).await,
        Err(DirectoryError::Lost { .. })
    ));
    assert_eq!(a.load("s1").await.unwrap().unwrap().image, b"image-1");

    // B takes over from incarnation 0: A's writes are refused from now on.
    assert_eq!(b.take_over("s1", 0, b"image-b").await.unwrap(), 1);
    assert!(matches!(
        a.save("s1", 0, save(b"late", &["0:9:late".into()], &[]))
            .await,
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
    match a.take_over("s1", 0, b"again").await {
        Err(DirectoryError::Raced {
            expected: 0,
            found: 1,
            ..
        }) => {}
        other => panic!("expected a lost race, got {other:?}"),
    }
    // Removal is the owner's too; then a takeover finds nothing.
    assert!(matches!(
        a.remove("s1", 1).await,
        Err(DirectoryError::Lost { .. })
    ));
    b.remove("s1", 1).await.unwrap();
    assert!(b.load("s1").await.unwrap().is_none());
    match a.take_over("s1", 1, b"x").await {
        Err(DirectoryError::Raced {
            found: u64::MAX, ..
        }) => {}
        other => panic!("expected no record, got {other:?}"),
    }
}

#[tokio::test]
async fn one_of_many_concurrent_takeovers_wins() {
    let Some(server) = redis() else { return };
    let owner = Directory::connect(&server.url(), "owner").await.unwrap();
    assert!(owner.create("contested", 4, b"i").await.unwrap());
    let mut tasks = Vec::new();
    for n in 0..16 {
        let d = Directory::connect(&server.url(), format!("n{n}"))
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            d.take_over("contested", 4, b"mine").await
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

#[tokio::test]
async fn saves_log_applied_input_in_order_and_count_releases() {
    let Some(server) = redis() else { return };
    let a = Directory::connect(&server.url(), "a").await.unwrap();
    assert!(a.create("s", 0, b"").await.unwrap());
    let first: Vec<String> = vec!["0:1:e1".into(), "0:2:e2".into()];
    assert!(a
        .save("s", 0, save(b"1", &first, &[]))
        .await
        .unwrap()
        .is_empty());
    let counts = a
        .save(
            "s",
            0,
            save(b"2", &["0:3:e3".into()], &["r1".into(), "r2".into()]),
        )
        .await
        .unwrap();
    assert_eq!(counts, [1, 1]);
    // A second release of r1 is counted, so a double release is visible.
    assert_eq!(
        a.save("s", 0, save(b"3", &[], &["r1".into()]))
            .await
            .unwrap(),
        [2]
    );
    assert_eq!(
        a.applied("s", 0, 10).await.unwrap(),
        ["0:1:e1", "0:2:e2", "0:3:e3"]
    );
    assert_eq!(a.applied("s", 1, 1).await.unwrap(), ["0:2:e2"]);
    assert!(a.applied("s", 0, 0).await.unwrap().is_empty());
}

#[tokio::test]
async fn liveness_lasts_for_its_ttl() {
    let Some(server) = redis() else { return };
    let a = Directory::connect(&server.url(), "a").await.unwrap();
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

#[tokio::test]
async fn a_malformed_record_is_named() {
    let Some(server) = redis() else { return };
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
