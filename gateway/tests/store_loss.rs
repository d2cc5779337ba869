//! The directory when the store itself loses data, against a real
//! `redis-server` (ignored unless run with `--ignored`: `duplex_testkit::stores`): a store
//! emptied under the nodes (`FLUSHALL`, as a restart without its data
//! leaves it) is told from a closed session and written back; a save sent
//! twice counts once; a takeover tells the node it took the session from;
//! a write-back racing a save never undoes what the save stored.

use std::time::Duration;

use duplex_gateway::cluster::{Directory, DirectoryError, Save, WriteBack};
use duplex_testkit::stores;
use futures_util::StreamExt;

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

async fn flushall(url: &str) {
    let client = redis::Client::open(url).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let () = redis::cmd("FLUSHALL").query_async(&mut c).await.unwrap();
}

#[tokio::test]
#[ignore = "needs redis-server"]
async fn an_emptied_store_is_told_from_a_close_and_written_back() {
    let server = stores::server();
    let a = Directory::connect(&server.url(), "a").await.unwrap();
    // The first node to ask sets the generation; the others see it.
    assert_eq!(a.generation("g1").await.unwrap(), "g1");
    assert_eq!(a.generation("other").await.unwrap(), "g1");

    let log = strings(&["0:1:c1", "0:2:c2"]);
    let bound = strings(&["r1"]);
    assert_eq!(a.create_at("s", 0, Save::default()).await.unwrap(), Some(0));
    let save = Save {
        image: b"i1",
        version: 1,
        applied: &log,
        bound: &bound,
        base: Some(0),
        ..Save::default()
    };
    a.save("s", 0, save).await.unwrap();

    flushall(&server.url()).await;
    // The store has no generation now: the next to ask sets another.
    assert_eq!(a.generation("g2").await.unwrap(), "g2");
    // A save finds neither the record nor a tombstone: the store lost it.
    let next = strings(&["0:3:c3"]);
    let save = Save {
        image: b"i2",
        version: 2,
        applied: &next,
        base: Some(2),
        ..Save::default()
    };
    assert!(matches!(
        a.save("s", 0, save).await,
        Err(DirectoryError::Missing { .. })
    ));
    assert!(
        a.applied_log("s").await.unwrap().is_empty(),
        "nothing written"
    );

    // Written back from what the node holds; then the save goes through.
    let all = strings(&["0:1:c1", "0:2:c2", "0:3:c3"]);
    let requests = [("r1".to_owned(), 0, false)];
    let back = WriteBack {
        image: b"i2",
        version: 2,
        applied: &all,
        requests: &requests,
    };
    assert!(a.write_back("s", 0, back).await.unwrap());
    let rec = a.load("s").await.unwrap().unwrap();
    assert_eq!(
        (rec.node.as_str(), rec.incarnation, rec.image.as_slice()),
        ("a", 0, &b"i2"[..])
    );
    assert_eq!(a.applied_log("s").await.unwrap(), all);
    assert_eq!(a.releases("s").await.unwrap(), [("r1".to_owned(), 0)]);

    // A log shorter than the node stored: the store is behind.
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let _: Option<String> = redis::cmd("RPOP")
        .arg("dx:{s}:applied")
        .query_async(&mut c)
        .await
        .unwrap();
    let save = Save {
        image: b"i3",
        version: 3,
        base: Some(3),
        ..Save::default()
    };
    assert!(matches!(
        a.save("s", 0, save).await,
        Err(DirectoryError::Behind {
            holds: 2,
            expected: 3,
            ..
        })
    ));

    // A closed session leaves a tombstone: its owner's late save is
    // refused as any other node's would be, and nobody writes it back.
    assert!(a.write_back("s", 0, back).await.unwrap());
    a.close(
        "s",
        0,
        Save {
            base: Some(3),
            ..Save::default()
        },
    )
    .await
    .unwrap();
    assert!(matches!(
        a.save("s", 0, Save::default()).await,
        Err(DirectoryError::Lost { .. })
    ));
    assert!(!a.write_back("s", 0, back).await.unwrap());
    assert!(a.was_closed("s").await.unwrap());
    assert!(!a.was_closed("never").await.unwrap());
    assert_eq!(
        a.applied_log("s").await.unwrap(),
        all,
        "the log stays for audit"
    );
}

#[tokio::test]
#[ignore = "needs redis-server"]
async fn a_closed_session_is_written_back_closed() {
    let server = stores::server();
    let a = Directory::connect(&server.url(), "a").await.unwrap();
    let all = strings(&["0:1:c1"]);
    let requests = [("r1".to_owned(), 1, true)];
    let back = WriteBack {
        applied: &all,
        requests: &requests,
        ..WriteBack::default()
    };
    // An empty image: the log, the counts and the tombstone, no record.
    assert!(a.write_back("gone", 2, back).await.unwrap());
    assert!(a.load("gone").await.unwrap().is_none());
    assert_eq!(a.applied_log("gone").await.unwrap(), all);
    assert_eq!(a.releases("gone").await.unwrap(), [("r1".to_owned(), 1)]);
    assert!(matches!(
        a.save("gone", 2, Save::default()).await,
        Err(DirectoryError::Lost { .. })
    ));
    // The release is noted as this holder's: sent again, it counts once.
    let b = Directory::connect(&server.url(), "b").await.unwrap();
    assert!(
        b.create("gone", 0, Save::default()).await.unwrap(),
        "an id can be used again"
    );
}

/// A failover to a replica that missed a release, then the close: the
/// close lands (the log is whole, so nothing looks lost) and leaves the
/// release at 0 under the tombstone. The closer's write-back of the closed
/// session restores it; another holder's, or one with an image, is still
/// refused.
#[tokio::test]
#[ignore = "needs redis-server"]
async fn the_closer_restores_a_release_the_store_lost_before_the_close() {
    let server = stores::server();
    let a = Directory::connect(&server.url(), "a").await.unwrap();
    let b = Directory::connect(&server.url(), "b").await.unwrap();
    let log = strings(&["0:1:c1"]);
    let r1 = strings(&["r1"]);
    let create = Save {
        image: b"i1",
        version: 1,
        applied: &log,
        bound: &r1,
        base: Some(0),
        ..Save::default()
    };
    assert!(a.create("s", 0, create).await.unwrap());
    let release = Save {
        image: b"i2",
        version: 2,
        released: &r1,
        base: Some(1),
        ..Save::default()
    };
    assert_eq!(a.save("s", 0, release).await.unwrap(), [1]);
    // The replica promoted in the primary's place had not received the
    // release.
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let () = redis::cmd("HSET")
        .arg("dx:{s}:released")
        .arg("r1")
        .arg(0)
        .query_async(&mut c)
        .await
        .unwrap();
    let _: i64 = redis::cmd("DEL")
        .arg("dx:{s}:relby")
        .query_async(&mut c)
        .await
        .unwrap();
    let close = Save {
        base: Some(1),
        ..Save::default()
    };
    a.close("s", 0, close).await.unwrap();
    assert_eq!(a.releases("s").await.unwrap(), [("r1".to_owned(), 0)]);

    let requests = [("r1".to_owned(), 1, true)];
    let closed = WriteBack {
        applied: &log,
        requests: &requests,
        ..WriteBack::default()
    };
    assert!(
        !b.write_back("s", 0, closed).await.unwrap(),
        "not the closer"
    );
    let open = WriteBack {
        image: b"i2",
        version: 2,
        ..closed
    };
    assert!(
        !a.write_back("s", 0, open).await.unwrap(),
        "closed: no record comes back"
    );
    assert_eq!(a.releases("s").await.unwrap(), [("r1".to_owned(), 0)]);
    assert!(a.write_back("s", 0, closed).await.unwrap());
    assert_eq!(a.releases("s").await.unwrap(), [("r1".to_owned(), 1)]);
    assert!(a.load("s").await.unwrap().is_none(), "still closed");
    assert!(a.was_closed("s").await.unwrap());
    assert_eq!(a.applied_log("s").await.unwrap(), log);
    // Written back again (a sweep repeated), it counts once.
    assert!(a.write_back("s", 0, closed).await.unwrap());
    assert_eq!(a.releases("s").await.unwrap(), [("r1".to_owned(), 1)]);
}

#[tokio::test]
#[ignore = "needs redis-server"]
async fn a_save_sent_again_counts_once() {
    let server = stores::server();
    let a = Directory::connect(&server.url(), "a").await.unwrap();
    assert!(a.create("s", 0, Save::default()).await.unwrap());
    let first = strings(&["0:1:c1"]);
    let both = strings(&["0:1:c1", "0:2:c2"]);
    let released = strings(&["r1"]);
    let save = |applied, version| Save {
        image: b"i",
        version,
        applied,
        released: &released,
        base: Some(0),
        ..Save::default()
    };
    // The first save's answer is lost; the next carries it again.
    assert_eq!(a.save("s", 0, save(&first, 1)).await.unwrap(), [1]);
    assert_eq!(a.save("s", 0, save(&both, 2)).await.unwrap(), [1]);
    assert_eq!(a.applied_log("s").await.unwrap(), both);
    assert_eq!(a.releases("s").await.unwrap(), [("r1".to_owned(), 1)]);
    // Without a base nothing is deduplicated (the caller does not know).
    let again = Save {
        applied: &first,
        ..Save::default()
    };
    a.save("s", 0, again).await.unwrap();
    assert_eq!(a.applied_log("s").await.unwrap().len(), 3);
}

#[tokio::test]
#[ignore = "needs redis-server"]
async fn a_takeover_tells_the_node_it_took_the_session_from() {
    let server = stores::server();
    let a = Directory::connect(&server.url(), "a").await.unwrap();
    let b = Directory::connect(&server.url(), "b").await.unwrap();
    let notices = a.moved_notices().await.unwrap();
    let mut notices = std::pin::pin!(notices);
    assert!(a.create("s", 3, Save::default()).await.unwrap());
    let read = b.load("s").await.unwrap().unwrap();
    b.take_over("s", &read, Save::default()).await.unwrap();
    let notice = tokio::time::timeout(Duration::from_secs(5), notices.next())
        .await
        .expect("a notice within 5 s");
    assert_eq!(notice, Some(Some(("s".to_owned(), 4))));
}

#[tokio::test]
#[ignore = "needs redis-server"]
async fn a_store_fallen_back_to_an_older_incarnation_is_written_back_not_left() {
    let server = stores::server();
    let a = Directory::connect(&server.url(), "a").await.unwrap();
    let b = Directory::connect(&server.url(), "b").await.unwrap();
    assert!(a.create("s", 0, Save::default()).await.unwrap());
    let read = b.load("s").await.unwrap().unwrap();
    let inc = b
        .take_over("s", &read, Save::default())
        .await
        .unwrap()
        .incarnation;
    let log = strings(&["1:1:c1"]);
    let save = Save {
        image: b"b1",
        version: 5,
        applied: &log,
        base: Some(0),
        ..Save::default()
    };
    b.save("s", inc, save).await.unwrap();
    // A failover to a replica that missed the takeover: the record is
    // a's again, at incarnation 0.
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let () = redis::cmd("HSET")
        .arg("dx:{s}:rec")
        .arg("node")
        .arg("a")
        .arg("inc")
        .arg(0)
        .query_async(&mut c)
        .await
        .unwrap();
    // b's next save is not told "moved" (it would drop its copy): the
    // store lost b's takeover.
    let next = strings(&["1:2:c2"]);
    let save = Save {
        image: b"b2",
        version: 6,
        applied: &next,
        base: Some(1),
        ..Save::default()
    };
    let refused = b.save("s", inc, save).await;
    assert!(
        matches!(refused, Err(DirectoryError::Missing { .. })),
        "{refused:?}"
    );
    let all = strings(&["1:1:c1", "1:2:c2"]);
    let back = WriteBack {
        image: b"b2",
        version: 6,
        applied: &all,
        requests: &[],
    };
    assert!(b.write_back("s", inc, back).await.unwrap());
    let record = b.load("s").await.unwrap().unwrap();
    assert_eq!((record.node.as_str(), record.incarnation), ("b", inc));
    assert_eq!(b.applied_log("s").await.unwrap(), all);
    // a, at the older incarnation, stays fenced out.
    let late = a.save("s", 0, Save::default()).await;
    assert!(matches!(late, Err(DirectoryError::Lost { .. })), "{late:?}");
}

#[tokio::test]
#[ignore = "needs redis-server"]
async fn a_write_back_racing_a_save_keeps_what_the_save_stored() {
    let server = stores::server();
    let a = Directory::connect(&server.url(), "a").await.unwrap();
    assert_eq!(a.create_at("s", 0, Save::default()).await.unwrap(), Some(0));
    // A save of a later image, with one more entry, lands first...
    let log = strings(&["0:1:c1", "0:2:c2"]);
    let save = Save {
        image: b"i5",
        version: 5,
        applied: &log,
        base: Some(0),
        ..Save::default()
    };
    a.save("s", 0, save).await.unwrap();
    // ...then a write-back of the same holder, taken a moment before it.
    let older = strings(&["0:1:c1"]);
    let back = WriteBack {
        image: b"i4",
        version: 4,
        applied: &older,
        requests: &[],
    };
    assert!(a.write_back("s", 0, back).await.unwrap());
    let record = a.load("s").await.unwrap().unwrap();
    assert_eq!(record.image, b"i5", "the later image stays");
    assert_eq!(a.applied_log("s").await.unwrap(), log, "nothing removed");

    // A store that lost the tail gets it back, after what it kept.
    flushall(&server.url()).await;
    let kept = strings(&["0:1:c1"]);
    let back = WriteBack {
        image: b"i6",
        version: 6,
        applied: &kept,
        requests: &[],
    };
    assert!(a.write_back("s", 0, back).await.unwrap());
    let all = strings(&["0:1:c1", "0:2:c2", "0:3:c3"]);
    let back = WriteBack {
        image: b"i7",
        version: 7,
        applied: &all,
        requests: &[],
    };
    assert!(a.write_back("s", 0, back).await.unwrap());
    assert_eq!(a.applied_log("s").await.unwrap(), all);
    assert_eq!(a.load("s").await.unwrap().unwrap().image, b"i7");
}
