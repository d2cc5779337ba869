//! The realtime decoder's unit tests.

use super::{decode, decode_tree};
use proptest::prelude::*;

/// Messages near the frequent events: right and wrong types for each
/// field, nulls, escapes, duplicates, unknown fields, other types.
fn message() -> impl Strategy<Value = String> {
    let kind = prop_oneof![
        Just(r#""input_audio_buffer.append""#.to_owned()),
        Just(r#""push_chunk""#.to_owned()),
        Just(r#""session.heartbeat""#.to_owned()),
        Just(r#""session.event_ack""#.to_owned()),
        Just(r#""session.close""#.to_owned()),
        Just(r#""no.such""#.to_owned()),
        Just("7".to_owned()),
        Just("null".to_owned()),
    ];
    let value = prop_oneof![
        Just("null".to_owned()),
        Just("12".to_owned()),
        Just("-1".to_owned()),
        Just("2.5".to_owned()),
        Just("true".to_owned()),
        Just(r#""AAEC""#.to_owned()),
        Just(r#""a\u0041b""#.to_owned()),
        Just(format!(r#""{}""#, "e".repeat(257))),
        Just(format!(r#""{}""#, "e".repeat(256))),
        Just("{}".to_owned()),
        Just("[1]".to_owned()),
    ];
    let name = prop_oneof![
        Just("event_id"),
        Just("audio"),
        Just("server_event_seq"),
        Just("transcript"),
        Just("type"),
        Just("other"),
        Just("is_speech"),
        Just("vad"),
        Just("overlap_action"),
        Just("force_listen"),
        Just("duration_ms"),
    ];
    (
        kind,
        proptest::collection::vec((name, value), 0..5),
        any::<bool>(),
    )
        .prop_map(|(kind, fields, typed_first)| {
            let mut parts = Vec::new();
            if typed_first {
                parts.push(format!(r#""type":{kind}"#));
            }
            for (n, v) in fields {
                parts.push(format!(r#""{n}":{v}"#));
            }
            if !typed_first {
                parts.push(format!(r#""type":{kind}"#));
            }
            format!("{{{}}}", parts.join(","))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The fast path answers every message as the full decoder does.
    #[test]
    fn hot_path_agrees_with_the_tree(text in message()) {
        prop_assert_eq!(decode(&text), decode_tree(&text));
    }

    #[test]
    fn any_text_agrees(text in ".{0,80}") {
        prop_assert_eq!(decode(&text), decode_tree(&text));
    }
}

#[test]
fn frequent_events_take_the_fast_path() {
    for text in [
        r#"{"type":"input_audio_buffer.append","event_id":"c1","audio":"AAEC"}"#,
        r#"{"type":"input_audio_buffer.append","audio":"AAEC","transcript":"hello"}"#,
        r#"{"type":"session.heartbeat"}"#,
        r#"{"type":"session.event_ack","server_event_seq":64}"#,
    ] {
        assert!(super::decode_hot(text).is_some(), "{text}");
        assert_eq!(decode(text), decode_tree(text));
    }
}

/// A chunk's `event_id` and audio are read in place from the message, not
/// copied (the audio is most of a chunk's bytes); only a string with
/// escapes is unescaped into a copy, with the same value.
#[test]
fn a_chunk_is_decoded_without_copying_its_strings() {
    use std::borrow::Cow;

    let text = r#"{"type":"input_audio_buffer.append","event_id":"chunk-7","audio":"AAECAw=="}"#;
    let Some(super::HotEvent::Append {
        event_id, audio, ..
    }) = super::decode_hot(text)
    else {
        panic!("not decoded as an append: {text}");
    };
    assert!(
        matches!(event_id, Some(Cow::Borrowed("chunk-7"))),
        "{event_id:?}"
    );
    assert!(matches!(audio, Cow::Borrowed("AAECAw==")), "{audio:?}");

    let escaped =
        r#"{"type":"input_audio_buffer.append","event_id":"a\"b","audio":"AA\u003d\u003d"}"#;
    let Some(super::HotEvent::Append {
        event_id, audio, ..
    }) = super::decode_hot(escaped)
    else {
        panic!("not decoded as an append: {escaped}");
    };
    assert_eq!(
        (event_id.as_deref(), audio.as_ref()),
        (Some("a\"b"), "AA==")
    );
}

/// A configuration may carry a reference voice: a `session.update` is
/// read up to the transport's limit; every other event keeps 64 KiB.
#[test]
fn a_session_update_may_carry_a_reference_voice() {
    use super::{RealtimeEvent, MAX_SESSION_UPDATE};
    let voice = format!("data:audio/wav;base64,{}", "A".repeat(300_000));
    let update = serde_json::json!({"type": "session.update", "session": {"ref_audio": voice}});
    let Ok(RealtimeEvent::SessionUpdate { session, .. }) = decode(&update.to_string()) else {
        panic!("a 300 KB session.update is read");
    };
    assert_eq!(
        session["ref_audio"].as_str().map(str::len),
        Some(voice.len())
    );

    let append = format!(
        r#"{{"type":"input_audio_buffer.append","audio":"{}"}}"#,
        "A".repeat(100_000)
    );
    let refused = decode(&append).unwrap_err();
    assert_eq!(refused.to_value()["error"]["code"], "too_large");

    let huge = format!(
        r#"{{"type":"session.update","session":{{"ref_audio":"{}"}}}}"#,
        "A".repeat(MAX_SESSION_UPDATE)
    );
    let refused = decode(&huge).unwrap_err();
    assert_eq!(refused.to_value()["error"]["code"], "too_large");
}

/// An append with an overlap hint is read by the full decoder, which
/// reads every hint as the release does (a hint of another type is no
/// hint, flags are truthy, `overlap` stands in for an empty
/// `overlap_action`).
#[test]
fn overlap_hints_are_read_as_the_release_reads_them() {
    use super::overlap::HINT_KEYS;
    use super::{AppendHints, RealtimeEvent};
    use duplex_core::overlap::{Forced, OverlapRequest};

    let hints = |extra: &str| {
        let text = format!(r#"{{"type":"input_audio_buffer.append","audio":"AAA="{extra}}}"#);
        let hot = super::decode_hot(&text).is_some();
        match decode(&text) {
            Ok(RealtimeEvent::Append { hints, .. }) => (hot, hints),
            other => panic!("{text}: {other:?}"),
        }
    };
    assert_eq!(hints(""), (true, AppendHints::default()));
    for key in HINT_KEYS {
        let (hot, _) = hints(&format!(r#","{key}":true"#));
        assert!(!hot, "{key} is left to the full decoder");
        assert_eq!(
            hints(&format!(r#","{key}":null"#)),
            (true, AppendHints::default())
        );
    }
    let cases = [
        (
            r#","is_speech":"yes","speech":false"#,
            AppendHints {
                speech: Some(false),
                ..AppendHints::default()
            },
        ),
        (
            r#","vad":{"speech_probability":0.7,"speech_started":true}"#,
            AppendHints {
                speech: Some(true),
                vad_speech_started: Some(true),
                ..AppendHints::default()
            },
        ),
        // `vad.get("speech_probability", vad.get("probability"))`: present, not a number.
        (
            r#","vad":{"speech_probability":"high","probability":0.9}"#,
            AppendHints::default(),
        ),
        (
            r#","speech_probability":0.2"#,
            AppendHints {
                speech: Some(false),
                ..AppendHints::default()
            },
        ),
        (
            r#","overlap_action":"","overlap":"ignore""#,
            AppendHints {
                request: Some(OverlapRequest::Drop),
                ..AppendHints::default()
            },
        ),
        (
            r#","overlap_action":5,"overlap":"ignore""#,
            AppendHints::default(),
        ),
        (r#","overlap_action":"shout""#, AppendHints::default()),
        (
            r#","force_barge_in":"yes","force_listen":true"#,
            AppendHints {
                forced: Some(Forced::BargeIn),
                ..AppendHints::default()
            },
        ),
        (
            r#","force_barge_in":0,"force_listen":1"#,
            AppendHints {
                forced: Some(Forced::Listen),
                ..AppendHints::default()
            },
        ),
    ];
    for (extra, want) in cases {
        assert_eq!(hints(extra), (false, want), "{extra}");
    }
}
