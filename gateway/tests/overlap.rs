//! Speech over the model's, on the contract's paths: each chunk that
//! arrives while a response is in progress gets the session's overlap
//! decision (`overlap.decision`), and the decision is carried out. The
//! model here talks until it is stopped.

use std::sync::Arc;
use std::time::Duration;

use duplex_gateway::engine::{Engine, Reply, Sink, Turn};
use duplex_gateway::protocol::encode_audio;
use duplex_gateway::Config;
use duplex_testkit::socket::{connect, next_json, send, start, Ws};
use serde_json::{json, Value};

/// A model that talks until the gateway stops it.
struct Talker;

impl Engine for Talker {
    fn respond(&self, _: Turn, mut sink: Sink) -> Reply {
        Box::pin(async move {
            loop {
                sink.text("la ").await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    }
}

/// `ms` of loud 16 kHz pcm16.
fn speech(ms: usize) -> String {
    encode_audio(&[0x00, 0x20].repeat(ms * 16))
}

/// `ms` of silence.
fn silence(ms: usize) -> String {
    encode_audio(&vec![0; ms * 32])
}

/// The next event of `kind`, skipping the model's talk; every event seen
/// on the way is checked not to be an error.
async fn until(ws: &mut Ws, kind: &str) -> Value {
    loop {
        let event = next_json(ws, Duration::from_secs(10)).await;
        assert_ne!(event["type"], "error", "refused: {event}");
        if event["type"] == kind {
            return event;
        }
    }
}

/// A gateway with the talking model.
type Started = (
    Arc<duplex_gateway::Gateway>,
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<duplex_gateway::stats::Counters>,
);

/// A gateway, and a session on its `path` with `session`, answering a
/// first turn: the model is talking when this returns.
async fn talking(path: &str, session: Value) -> (Started, Ws) {
    let gateway = start(Config {
        engine: Arc::new(Talker),
        ..Config::default()
    })
    .await;
    let mut ws = connect(&format!("{}{path}", gateway.1)).await;
    send(
        &mut ws,
        json!({"type": "session.update", "session": session}),
    )
    .await;
    until(&mut ws, "session.updated").await;
    send(
        &mut ws,
        json!({"type": "input_audio_buffer.append", "audio": speech(100)}),
    )
    .await;
    send(
        &mut ws,
        json!({"type": "input_audio_buffer.commit", "response_create": true}),
    )
    .await;
    until(&mut ws, "response.created").await;
    (gateway, ws)
}

/// Stops a test's gateway once its client is gone.
async fn stop((_gw, _, stop, server): Started, ws: Ws) {
    drop(ws);
    let _ = stop.send(());
    server.await.unwrap();
}

async fn overlapped(ws: &mut Ws, chunk: Value) -> Value {
    send(ws, chunk).await;
    until(ws, "overlap.decision").await
}

fn append(audio: &str) -> Value {
    json!({"type": "input_audio_buffer.append", "audio": audio})
}

#[tokio::test]
async fn an_acknowledgement_is_heard_and_a_long_interruption_takes_the_turn() {
    let rule = json!({"session_id": "overlap-1", "extra_body": {
        "overlap_policy": "thresholds", "overlap_short_ack_ms": 300, "overlap_barge_in_ms": 600}});
    let (gateway, mut ws) = talking("/v1/realtime?duplex=1", rule).await;

    let d = overlapped(&mut ws, append(&speech(200))).await;
    assert_eq!(
        (d["action"].as_str(), d["reason"].as_str()),
        (Some("listen"), Some("short_ack")),
        "{d}"
    );
    assert_eq!(
        (
            d["policy"].as_str(),
            d["metadata"]["overlap_speech_ms"].as_u64()
        ),
        (Some("thresholds"), Some(200))
    );
    let d = overlapped(&mut ws, append(&silence(200))).await;
    assert_eq!(
        (d["action"].as_str(), d["reason"].as_str()),
        (Some("drop"), Some("silence_or_noise")),
        "{d}"
    );
    let mut said = append(&speech(100));
    said["transcript"] = json!("okay");
    let d = overlapped(&mut ws, said).await;
    assert_eq!(d["reason"], "short_ack_transcript", "{d}");
    assert_eq!(
        d["metadata"]["overlap_speech_ms"], 0,
        "an acknowledgement starts the count again"
    );
    // A client's VAD says this loud chunk is not speech.
    let mut quiet = append(&speech(400));
    quiet["is_speech"] = json!(false);
    assert_eq!(overlapped(&mut ws, quiet).await["action"], "drop");

    let d = overlapped(&mut ws, append(&speech(400))).await;
    assert_eq!(
        (d["action"].as_str(), d["reason"].as_str()),
        (Some("listen"), Some("accumulating_overlap_speech")),
        "{d}"
    );
    let d = overlapped(&mut ws, append(&speech(400))).await;
    assert_eq!(
        (d["action"].as_str(), d["reason"].as_str()),
        (Some("barge_in"), Some("long_overlap_speech")),
        "{d}"
    );
    assert_eq!(d["metadata"]["overlap_speech_ms"], 800);
    let done = until(&mut ws, "response.done").await;
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    assert_eq!(
        done["response"]["status_details"]["reason"], "barge_in",
        "{done}"
    );
    // The chunk that took the turn is the new turn's first: it can be
    // committed, and nothing more is decided with the model silent.
    until(&mut ws, "input_audio_buffer.speech_started").await;
    send(&mut ws, append(&speech(100))).await;
    send(&mut ws, json!({"type": "input_audio_buffer.commit"})).await;
    let committed = until(&mut ws, "input_audio_buffer.committed").await;
    assert!(committed["item_id"].is_string(), "{committed}");
    stop(gateway, ws).await;
}

#[tokio::test]
async fn a_client_s_word_comes_first_and_a_bad_rule_changes_nothing() {
    let (gateway, mut ws) = talking("/v1/duplex", json!({"session_id": "overlap-2"})).await;
    // The default rule listens to speech.
    let d = overlapped(&mut ws, append(&speech(1_000))).await;
    assert_eq!(
        (d["policy"].as_str(), d["reason"].as_str()),
        (Some("listen_only"), Some("policy_listen_only")),
        "{d}"
    );
    for bad in [
        json!({"overlap_policy": "shout"}),
        json!({"extra_body": {"overlap_barge_in_ms": 70_000}}),
    ] {
        send(
            &mut ws,
            json!({"type": "session.update", "event_id": "bad", "session": bad}),
        )
        .await;
        let refused = loop {
            let e = next_json(&mut ws, Duration::from_secs(10)).await;
            if e["type"] == "error" {
                break e;
            }
        };
        assert_eq!(refused["error"]["code"], "invalid_value", "{refused}");
        assert_eq!(refused["error"]["event_id"], "bad");
    }
    let d = overlapped(&mut ws, append(&speech(20))).await;
    assert_eq!(
        d["policy"], "listen_only",
        "the refused updates changed nothing: {d}"
    );
    let mut word = append(&silence(20));
    word["overlap_action"] = json!("interrupt");
    let d = overlapped(&mut ws, word).await;
    assert_eq!(
        (d["action"].as_str(), d["reason"].as_str()),
        (Some("barge_in"), Some("client_overlap_action")),
        "{d}"
    );
    assert_eq!(
        until(&mut ws, "response.done").await["response"]["status"],
        "cancelled"
    );

    // A rule set mid-session: any speech barges in.
    send(
        &mut ws,
        json!({"type": "session.update", "session": {"overlap_policy": "barge_in_on_speech"}}),
    )
    .await;
    until(&mut ws, "session.updated").await;
    send(
        &mut ws,
        json!({"type": "input_audio_buffer.commit", "response_create": true}),
    )
    .await;
    until(&mut ws, "response.created").await;
    let d = overlapped(&mut ws, append(&speech(20))).await;
    assert_eq!(
        (d["action"].as_str(), d["reason"].as_str()),
        (Some("barge_in"), Some("policy_barge_in_on_speech")),
        "{d}"
    );
    // `barge_in`, with nothing speaking, drops the pending turn.
    send(&mut ws, json!({"type": "barge_in"})).await;
    until(&mut ws, "input_audio_buffer.cleared").await;
    stop(gateway, ws).await;
}

#[tokio::test]
async fn openai_s_path_decides_nothing() {
    let rule = json!({"overlap_policy": "barge_in_on_speech"});
    let (gateway, mut ws) = talking("/v1/realtime", rule).await;
    send(&mut ws, append(&speech(200))).await;
    send(&mut ws, json!({"type": "response.cancel"})).await;
    loop {
        let event = next_json(&mut ws, Duration::from_secs(10)).await;
        assert_ne!(event["type"], "overlap.decision", "{event}");
        if event["type"] == "response.done" {
            assert_eq!(
                event["response"]["status_details"]["reason"],
                "client_cancelled"
            );
            break;
        }
    }
    stop(gateway, ws).await;
}

/// A rule refused at the first `session.update` opens nothing: the same
/// id opens afresh right after, with the rule it then names.
#[tokio::test]
async fn a_rule_refused_at_open_leaves_no_session() {
    let gateway = start(Config {
        engine: Arc::new(Talker),
        ..Config::default()
    })
    .await;
    let mut ws = connect(&format!("{}/v1/realtime?duplex=1&autostart=0", gateway.1)).await;
    let bad = json!({"session_id": "overlap-3", "overlap_policy": "sometimes"});
    send(
        &mut ws,
        json!({"type": "session.update", "event_id": "u1", "session": bad}),
    )
    .await;
    let refused = next_json(&mut ws, Duration::from_secs(10)).await;
    assert_eq!(refused["error"]["code"], "invalid_value", "{refused}");
    let good = json!({"session_id": "overlap-3", "overlap_policy": "barge_in_on_speech"});
    send(&mut ws, json!({"type": "session.update", "session": good})).await;
    let created = until(&mut ws, "session.created").await;
    assert_eq!(created["session"]["id"], "overlap-3", "{created}");
    assert_eq!(
        created["incarnation"], 0,
        "a first incarnation: nothing was opened before"
    );
    stop(gateway, ws).await;
}
