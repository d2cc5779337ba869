//! Property: no message a client can send panics the gateway, every reply
//! is a well-formed server event, and nothing a connection sends touches a
//! session it does not hold.

use proptest::prelude::*;

use crate::fuzzing::frames_keep_to_their_session;
use crate::protocol::encode_audio;

/// Frames shaped like the protocol, with hostile field values.
fn shaped() -> impl Strategy<Value = String> {
    const KINDS: [&str; 7] = [
        "session.open",
        "input.append",
        "input.commit",
        "response.cancel",
        "session.close",
        "session.audit",
        "admin.stats",
    ];
    let kind = prop_oneof![
        prop::sample::select(&KINDS[..]).prop_map(str::to_owned),
        "[a-z.]{0,16}",
    ];
    let id = prop_oneof![
        "[a-z0-9]{0,40}".prop_map(serde_json::Value::from),
        Just(serde_json::Value::Null),
        any::<i64>().prop_map(serde_json::Value::from),
    ];
    let number = prop_oneof![
        (0_u64..4).prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        "[a-z]{0,3}".prop_map(serde_json::Value::from),
    ];
    let audio = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64).prop_map(|b| encode_audio(&b)),
        ".{0,16}",
    ];
    (
        kind,
        id.clone(),
        id,
        number.clone(),
        number.clone(),
        number,
        audio,
    )
        .prop_map(|(kind, session_id, event_id, epoch, turn, token, audio)| {
            let mut m = serde_json::json!({
                "type": kind, "session_id": session_id, "event_id": event_id,
                "epoch": epoch, "turn": turn, "audio": audio,
            });
            // A string: a resume with a guessed token; otherwise a
            // plain open.
            if token.is_string() {
                m["resume_token"] = token;
            }
            m.to_string()
        })
}

fn frame() -> impl Strategy<Value = String> {
    prop_oneof![
        shaped(),
        prop::collection::vec(any::<u8>(), 0..256)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        ".{0,64}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn no_client_frame_panics_or_touches_another_session(frames in prop::collection::vec(frame(), 1..24)) {
        let kept = frames_keep_to_their_session(&frames);
        prop_assert!(kept.is_ok(), "{:?}", kept);
    }
}
