//! Snapshots against the model: every single-byte mutation of a real image
//! either is refused or restores to a session that passes
//! `duplex_tests::model::check_restored` (the `restore` fuzz target's
//! check, run here without a fuzzer).

use duplex_core::{
    AnySession, CloseReason, Fence, Finality, Id, InputMode, Instant, Modes, Open, OpenOptions,
    Session,
};
use duplex_tests::model::check_restored;

fn id(s: &str) -> Id {
    Id::new(s).expect("valid id")
}

/// Images of one busy session in each state that can be persisted.
fn images() -> Vec<Vec<u8>> {
    let f = Fence::new(id("kitchen"), 3).with_epoch(2);
    let opts = OpenOptions::default().modes(Modes::only(InputMode::AppendAudioChunk));
    let mut s = AnySession::from(Session::open(f.clone(), opts, Instant::from_millis(10)).unwrap());
    s.append(&f, InputMode::AppendAudioChunk).unwrap();
    s.bind(&f, 0, &id("llm")).unwrap();
    s.bind(&f, 1, &id("tts")).unwrap();
    s.reserve(&f, 2, &id("voc")).unwrap();
    s.record_completed(
        &f,
        &id("op-1"),
        InputMode::AppendAudioChunk,
        Finality::Partial,
        &[7, 8],
    )
    .unwrap();
    let mut buf = [0u8; Session::<Open>::SNAPSHOT_MAX];
    let mut out = vec![s.snapshot(&mut buf).unwrap().to_vec()];
    s.detach(&f, Instant::from_millis(20)).unwrap();
    out.push(s.snapshot(&mut buf).unwrap().to_vec());
    s.begin_close(&f, CloseReason::ClientClose).unwrap();
    out.push(s.snapshot(&mut buf).unwrap().to_vec());
    out
}

#[test]
fn every_single_byte_mutation_is_refused_or_restores_a_sound_session() {
    let (mut restored, mut refused) = (0, 0);
    for image in images() {
        let first = AnySession::restore(&image).unwrap();
        let again = AnySession::restore(&image).unwrap();
        check_restored(&first, again).unwrap();
        for at in 0..image.len() {
            for value in [0u8, 1, 2, 0x7F, 0x80, 0xFF, image[at].wrapping_add(1)] {
                let mut bytes = image.clone();
                bytes[at] = value;
                let Ok(first) = AnySession::restore(&bytes) else {
                    refused += 1;
                    continue;
                };
                restored += 1;
                let mut buf = [0u8; Session::<Open>::SNAPSHOT_MAX];
                let again = AnySession::restore(first.snapshot(&mut buf).unwrap()).unwrap();
                if let Err(broken) = check_restored(&first, again) {
                    panic!("byte {at} = {value:#x}: {broken}");
                }
            }
        }
    }
    // Both outcomes occur: the check is not vacuous either way.
    assert!(
        restored > 100 && refused > 100,
        "restored {restored}, refused {refused}"
    );
}
