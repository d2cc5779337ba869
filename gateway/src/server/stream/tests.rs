//! The stream's numbering, journal, replay, cancellation and routing rules.

use std::sync::Arc;

use crate::Id;
use serde_json::Value;

use super::{contiguous_tail, with_seq, Journals, Resync};
use crate::server::outbox::Outbox;

/// Every event the stream numbers was rendered with room for its number:
/// numbering it keeps its allocation (no copy per event).
#[test]
fn numbering_a_rendered_event_keeps_its_allocation() {
    use crate::protocol::realtime::{self, ResponseIds};

    let ids = ResponseIds::of("resp-with-a-long-request-id-0123456789");
    let mut events = vec![
        realtime::heartbeat_ack("a-client-session-id-of-thirty-six-b"),
        realtime::heartbeat_ack("quote \"and\" escapes \u{1}"),
        realtime::text_delta(&ids, " piece 7 of the answer to turn 12."),
        realtime::numberable(&serde_json::json!({"type": "input_audio_buffer.cleared"})),
    ];
    events.extend(realtime::response_opened(&ids, 3, 12));
    events.extend(realtime::response_ended(
        &ids,
        "piece 0.",
        "completed",
        None,
    ));
    events.extend(realtime::response_ended(
        &ids,
        "p",
        "cancelled",
        Some("barge_in"),
    ));
    for event in events {
        let (at, text) = (event.as_ptr(), event.clone());
        let numbered = with_seq(event, u64::MAX);
        assert_eq!(numbered.as_ptr(), at, "moved: {text}");
        assert!(numbered.ends_with(&format!("\"server_event_seq\":{}}}", u64::MAX)));
    }
}

#[test]
fn the_number_is_added_to_any_object() {
    for (event, seq) in [
        (r#"{"type":"a"}"#, 1_u64),
        ("{}", 2),
        ("{ }", 3),
        (r#"{"type":"b","x":{"y":[1]}} "#, u64::MAX),
    ] {
        let v: Value = serde_json::from_str(&with_seq(event.to_owned(), seq)).unwrap();
        assert_eq!(v["server_event_seq"].as_u64(), Some(seq), "{event}");
    }
}

#[test]
fn a_hole_ends_what_can_be_replayed() {
    let run = |seqs: &[u64]| {
        let stored: Vec<(u64, String)> = seqs.iter().map(|s| (*s, String::new())).collect();
        contiguous_tail(&stored)
    };
    assert_eq!(run(&[]), 0);
    assert_eq!(run(&[4, 5, 6]), 0);
    assert_eq!(run(&[4, 5, 7, 8]), 2);
    assert_eq!(run(&[1, 3, 4, 6]), 3);
}

fn stored(seqs: &[u64]) -> Vec<(u64, String)> {
    seqs.iter()
        .map(|s| {
            (
                *s,
                format!(r#"{{"type":"session.heartbeat_ack","server_event_seq":{s}}}"#),
            )
        })
        .collect()
}

async fn replay(journals: &Arc<Journals>, seqs: &[u64], cursor: u64) -> Result<Vec<u64>, Resync> {
    let session = Id::new("s1").unwrap();
    let stream = journals.restore(&session, stored(seqs));
    let (outbox, mut rx) = Outbox::new(1 << 20);
    stream
        .attach(outbox, Some(cursor), None::<fn(u64) -> Value>)
        .await?;
    let mut got = Vec::new();
    while let Ok(message) = rx.try_recv() {
        let v: Value = serde_json::from_str(message.to_text().unwrap()).unwrap();
        got.push(v["server_event_seq"].as_u64().unwrap());
    }
    Ok(got)
}

/// A stored journal with a hole (events a node numbered but could not
/// store) replays only after the hole; a cursor before it is told to
/// start again, never handed the events across the hole.
#[tokio::test(flavor = "current_thread")]
async fn a_resume_never_replays_across_a_hole() {
    let journals = Arc::new(Journals::default());
    assert_eq!(replay(&journals, &[5, 6, 7, 8], 5).await, Ok(vec![6, 7, 8]));
    assert_eq!(replay(&journals, &[5, 6, 8, 9], 7).await, Ok(vec![8, 9]));
    // Before the kept run: what is before it is as good as evicted.
    assert_eq!(
        replay(&journals, &[5, 6, 8, 9], 6).await,
        Err(Resync::Overflow)
    );
    assert_eq!(
        replay(&journals, &[5, 6, 8, 9], 5).await,
        Err(Resync::Overflow)
    );
    assert_eq!(replay(&journals, &[5, 6, 8, 9], 9).await, Ok(vec![]));
    assert_eq!(replay(&journals, &[5, 6], 7).await, Err(Resync::Gap));
}

/// The numbers of the messages waiting in `rx`.
fn drain(
    rx: &mut tokio::sync::mpsc::Receiver<tokio_tungstenite::tungstenite::Message>,
    seen: &mut Vec<u64>,
) {
    while let Ok(message) = rx.try_recv() {
        let v: Value = serde_json::from_str(message.to_text().unwrap()).unwrap();
        seen.push(v["server_event_seq"].as_u64().unwrap());
    }
}

/// An emit cancelled while its socket's queue is full (its task
/// aborted mid-send) leaves numbered events unsent; the next emit
/// sends them first, so the socket sees every number in order.
#[tokio::test(flavor = "current_thread")]
async fn a_cancelled_emit_is_finished_by_the_next() {
    let journals = Arc::new(Journals::default());
    let stream = journals.stream(&Id::new("s2").unwrap());
    let (outbox, mut rx) = Outbox::new(1 << 20);
    stream
        .attach(outbox, None, None::<fn(u64) -> Value>)
        .await
        .unwrap();
    let emitting = {
        let stream = Arc::clone(&stream);
        tokio::spawn(async move {
            for _ in 0..400 {
                stream.emit(vec![serde_json::json!({"type": "x"})]).await;
            }
        })
    };
    // Let it fill the queue and block on the full queue, then abort.
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    emitting.abort();
    let _ = emitting.await;
    let mut seen = Vec::new();
    drain(&mut rx, &mut seen);
    let (numbered, _) = stream.position().await;
    // The aborted emit had numbered more than the socket got.
    assert!(
        (seen.len() as u64) < numbered,
        "{} of {numbered}",
        seen.len()
    );
    stream.emit(vec![serde_json::json!({"type": "y"})]).await;
    drain(&mut rx, &mut seen);
    let expected: Vec<u64> = (1..=numbered + 1).collect();
    assert_eq!(seen, expected);
}

/// An answer from a connection another socket has superseded goes to
/// that connection's own socket, unnumbered: the socket that holds the
/// session never gets an answer to what it did not send.
#[tokio::test(flavor = "current_thread")]
async fn a_superseded_connection_answers_its_own_socket() {
    let journals = Arc::new(Journals::default());
    let stream = journals.stream(&Id::new("s3").unwrap());
    let (old, mut old_rx) = Outbox::new(1 << 20);
    let (new, mut new_rx) = Outbox::new(1 << 20);
    let (first, _) = stream
        .attach(old.clone(), None, None::<fn(u64) -> Value>)
        .await
        .unwrap();
    stream
        .answer(first, &old, [r#"{"type":"a"}"#.to_owned()])
        .await;
    let (second, _) = stream
        .attach(new.clone(), Some(1), None::<fn(u64) -> Value>)
        .await
        .unwrap();
    stream
        .answer(first, &old, [r#"{"type":"late"}"#.to_owned()])
        .await;
    stream
        .answer(second, &new, [r#"{"type":"b"}"#.to_owned()])
        .await;
    let (mut on_old, mut on_new) = (Vec::new(), Vec::new());
    while let Ok(m) = old_rx.try_recv() {
        on_old.push(serde_json::from_str::<Value>(m.to_text().unwrap()).unwrap());
    }
    while let Ok(m) = new_rx.try_recv() {
        on_new.push(serde_json::from_str::<Value>(m.to_text().unwrap()).unwrap());
    }
    assert_eq!(on_old.len(), 2);
    assert_eq!(on_old[0]["server_event_seq"], 1);
    assert_eq!(
        (
            on_old[1]["type"].as_str(),
            on_old[1].get("server_event_seq")
        ),
        (Some("late"), None)
    );
    assert_eq!(on_new.len(), 1);
    assert_eq!(
        (
            on_new[0]["type"].as_str(),
            on_new[0]["server_event_seq"].as_u64()
        ),
        (Some("b"), Some(2))
    );
}

/// Events sent after one was dropped for the byte bound are dropped
/// too: the client never sees a later event without the one before.
#[tokio::test(flavor = "current_thread")]
async fn an_overflowed_outbox_sends_nothing_more() {
    use tokio_tungstenite::tungstenite::Message;
    let (outbox, mut rx) = Outbox::new(100);
    outbox.send(Message::text("a".repeat(60))).await;
    outbox.send(Message::text("b".repeat(60))).await;
    outbox.send(Message::text("c")).await;
    assert_eq!(rx.try_recv().map(|m| m.len()), Ok(60));
    assert!(rx.try_recv().is_err());
}
