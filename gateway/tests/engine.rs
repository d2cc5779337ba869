//! A model behind the gateway through the engine seam: the parrot of
//! `examples/parrot.rs`, as a user would run it, heard in both dialects.

#[allow(dead_code)] // Its `main` serves; the tests start their own gateway.
#[path = "../examples/parrot.rs"]
mod parrot;

use std::sync::Arc;

use base64::Engine as _;
use duplex_gateway::protocol::{encode_audio, ServerEvent};
use duplex_gateway::Config;
use duplex_testkit::socket::{connect, next, next_json, send, start};
use serde_json::{json, Value};

fn parrot() -> Config {
    Config {
        engine: Arc::new(parrot::Parrot::default()),
        ..Config::default()
    }
}

/// Three chunks of different audio: what the user says.
fn speech() -> Vec<Vec<u8>> {
    (0..3_u8)
        .map(|k| {
            (0..1_000_u32)
                .map(|i| (i as u8).wrapping_mul(k + 1))
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn the_parrot_says_each_turn_back_in_the_native_dialect() {
    let (_gw, url, stop, server) = start(parrot()).await;
    let mut ws = connect(&url).await;
    send(
        &mut ws,
        json!({"type": "session.open", "session_id": "polly"}),
    )
    .await;
    assert!(matches!(next(&mut ws).await, ServerEvent::Opened { .. }));
    for turn in 0..2_u64 {
        let said = speech();
        for (k, chunk) in said.iter().enumerate() {
            let chunk = json!({"type": "input.append", "event_id": format!("t{turn}c{k}"),
                "epoch": 0, "turn": turn, "audio": encode_audio(chunk)});
            send(&mut ws, chunk).await;
            assert!(matches!(
                next(&mut ws).await,
                ServerEvent::Appended {
                    duplicate: false,
                    ..
                }
            ));
        }
        send(
            &mut ws,
            json!({"type": "input.commit", "epoch": 0, "turn": turn}),
        )
        .await;
        let mut heard = Vec::new();
        let mut indices = Vec::new();
        loop {
            match next(&mut ws).await {
                ServerEvent::Audio {
                    audio,
                    index,
                    turn: t,
                    ..
                } => {
                    assert_eq!(t, turn);
                    indices.push(index);
                    heard.extend(
                        base64::engine::general_purpose::STANDARD
                            .decode(audio)
                            .unwrap(),
                    );
                }
                ServerEvent::Done { turn: t, .. } => {
                    assert_eq!(t, turn);
                    break;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(heard, said.concat(), "turn {turn}: its own audio, in order");
        assert_eq!(
            indices,
            (0..5).collect::<Vec<u32>>(),
            "3,000 bytes in 640-byte pieces"
        );
    }
    drop(ws);
    let _ = stop.send(());
    let counters = server.await.unwrap();
    assert_eq!(counters.responses_done, 2);
}

#[tokio::test]
async fn the_parrot_says_each_turn_back_in_the_realtime_dialect() {
    let (_gw, url, stop, server) = start(parrot()).await;
    let mut ws = connect(&format!("{url}/v1/realtime?duplex=1")).await;
    let update = json!({"type": "session.update",
        "session": {"extra_body": {"auto_response": true}}});
    send(&mut ws, update).await;
    let said = speech();
    for chunk in &said {
        send(
            &mut ws,
            json!({"type": "input_audio_buffer.append", "audio": encode_audio(chunk)}),
        )
        .await;
    }
    send(&mut ws, json!({"type": "input_audio_buffer.commit"})).await;
    let mut heard = Vec::new();
    loop {
        let event = next_json(&mut ws, std::time::Duration::from_secs(10)).await;
        match event["type"].as_str() {
            Some("response.output_audio.delta") => {
                let piece = event["delta"].as_str().unwrap();
                heard.extend(
                    base64::engine::general_purpose::STANDARD
                        .decode(piece)
                        .unwrap(),
                );
            }
            Some("response.done") => {
                assert_eq!(event["response"]["status"], "completed");
                break;
            }
            Some("error") => panic!("refused: {event}"),
            _ => {}
        }
    }
    assert_eq!(heard, said.concat());
    drop(ws);
    let _ = stop.send(());
    assert_eq!(server.await.unwrap().responses_done, 1);
}

/// An engine that records what it is told of its sessions.
#[derive(Default)]
struct Recorder {
    configs: std::sync::Mutex<Vec<(String, serde_json::Map<String, Value>)>>,
    ended: std::sync::Mutex<Vec<String>>,
}

impl duplex_gateway::engine::Engine for Recorder {
    fn respond(
        &self,
        _: duplex_gateway::engine::Turn,
        _: duplex_gateway::engine::Sink,
    ) -> duplex_gateway::engine::Reply {
        Box::pin(async {})
    }

    fn configured(&self, session: &str, config: &serde_json::Map<String, Value>) {
        let mut configs = self.configs.lock().unwrap();
        configs.push((session.to_owned(), config.clone()));
    }

    fn ended(&self, session: &str) {
        self.ended.lock().unwrap().push(session.to_owned());
    }

    fn chunk_period_ms(&self) -> Option<u32> {
        Some(80)
    }
}

/// A client's `session.update` reaches the engine as the client sent it
/// (and the capabilities it is answered with name the engine's unit),
/// reference voice included (a 300 KB message, over the 64 KiB of every
/// other event), and the engine hears of the session's end. The session is
/// named as vllm-omni's scenario runners name theirs (54 bytes).
#[tokio::test]
async fn the_engine_is_told_the_configuration_and_the_end() {
    let recorder = Arc::new(Recorder::default());
    let config = Config {
        engine: Arc::clone(&recorder) as Arc<dyn duplex_gateway::engine::Engine>,
        ..Config::default()
    };
    let (_gw, url, stop, server) = start(config).await;
    let mut ws = connect(&format!("{url}/v1/realtime?duplex=1&autostart=0")).await;
    let voice = format!("data:audio/wav;base64,{}", "UklG".repeat(75_000));
    let id = "e2e-soft-interrupt-0f8e7d6c5b4a39281706f5e4d3c2b1a0-01";
    assert_eq!(id.len(), 54);
    let session = json!({"session_id": id, "ref_audio": voice,
        "extra_body": {"auto_response": true, "speaker": "parrot"}});
    send(
        &mut ws,
        json!({"type": "session.update", "session": session}),
    )
    .await;
    let mut capabilities = Value::Null;
    loop {
        let event = next_json(&mut ws, std::time::Duration::from_secs(10)).await;
        assert_ne!(event["type"], "error", "{event}");
        if event["type"] == "session.created" {
            capabilities = event["session"]["capabilities"].clone();
        }
        if event["type"] == "session.updated" {
            break;
        }
    }
    // The engine's unit of input, as vllm-omni's clients read it.
    assert_eq!(capabilities["chunk_period_ms"], 80, "{capabilities}");
    send(&mut ws, json!({"type": "session.close"})).await;
    while next_json(&mut ws, std::time::Duration::from_secs(10)).await["type"] != "session.closed" {
    }
    let configs = recorder.configs.lock().unwrap().clone();
    assert_eq!(configs.len(), 1);
    let seen = &configs[0].1;
    assert_eq!(configs[0].0, id);
    assert_eq!(seen["ref_audio"].as_str(), Some(voice.as_str()));
    assert_eq!(seen["extra_body"]["speaker"], "parrot");
    assert_eq!(*recorder.ended.lock().unwrap(), vec![id.to_owned()]);
    drop(ws);
    let _ = stop.send(());
    server.await.unwrap();
}

/// A gateway node of a cluster over `redis`, with `engine` behind it.
async fn node(
    redis: &str,
    name: &str,
    engine: Arc<Recorder>,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let config = Config {
        engine,
        resume_key: Some(b"the resume key both nodes share: 32+ bytes".to_vec()),
        ..Config::default()
    };
    let cluster = duplex_gateway::cluster::ClusterConfig::new(redis, name);
    let gw = duplex_gateway::Gateway::join(config, cluster)
        .await
        .expect("joined");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(gw.serve(listener, async {
        let _ = stopped.await;
    }));
    (url, stop)
}

/// A session its client resumes on another node of the cluster has ended
/// on the first: the engine there is told, once (it would otherwise keep
/// that session's state until the node stops).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server"]
async fn a_session_taken_over_by_another_node_ends_on_the_first() {
    let redis = duplex_testkit::stores::server();
    let (first, second) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
    let (a, stop_a) = node(&redis.url(), "a", Arc::clone(&first)).await;
    let (b, stop_b) = node(&redis.url(), "b", Arc::clone(&second)).await;

    let mut ws = connect(&a).await;
    send(&mut ws, json!({"type": "session.open"})).await;
    let ServerEvent::Opened {
        session_id,
        resume_token,
        ..
    } = next(&mut ws).await
    else {
        panic!("expected session.opened")
    };
    drop(ws);
    let mut moved = connect(&b).await;
    send(
        &mut moved,
        json!({"type": "session.open", "session_id": session_id, "resume_token": resume_token}),
    )
    .await;
    assert!(matches!(
        next(&mut moved).await,
        ServerEvent::Opened { resumed: true, .. }
    ));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while first.ended.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(*first.ended.lock().unwrap(), vec![session_id.clone()]);
    assert!(second.ended.lock().unwrap().is_empty(), "it goes on on b");
    drop(moved);
    let _ = (stop_a.send(()), stop_b.send(()));
}
