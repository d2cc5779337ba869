//! Snapshots: round trips in every state and after random operations, and
//! hostile images refused with the specific error.

extern crate std;

use std::format;
use std::string::String;
use std::vec::Vec;

use super::*;
use crate::append::Finality;
use crate::id::Id;
use crate::lease::Activity;
use crate::mode::InputMode;
use crate::overlap::{Overlap, OverlapConfig, OverlapPolicy};
use crate::requests::RequestState;
use crate::OpenOptions;

type Any = AnySession;

#[derive(Serialize, Deserialize)]
struct RecordImage<'a, const K: usize> {
    op: &'a str,
    position: PositionImage,
    results: heapless::Vec<i64, K>,
    meta: u8,
}

/// Every field of a session, in a fixed order (the wire format of
/// [`SNAPSHOT_VERSION`]), as serde derives it: the tests break images
/// field by field, and the module's own field-by-field writer must match
/// this byte for byte.
#[derive(Serialize, Deserialize)]
#[serde(bound(
    serialize = "SC: Serialize, RC: Serialize",
    deserialize = "SC: Deserialize<'de>, RC: Deserialize<'de>"
))]
struct Image<'a, SC, RC, const R: usize, const D: usize, const A: usize, const K: usize> {
    version: u8,
    profile: [u16; 6],
    state: StateImage,
    session: &'a str,
    incarnation: u64,
    epoch: u64,
    turn: u64,
    response: u64,
    idle_ttl_ms: u64,
    grace_ms: u64,
    generation: u64,
    last_activity_ms: u64,
    #[serde(borrow)]
    active: heapless::Vec<&'a str, A>,
    modes: u8,
    cursor: [u64; 4],
    #[serde(borrow)]
    resources: heapless::Vec<ResourceImage<'a>, R>,
    bound: u8,
    #[serde(borrow)]
    completed: heapless::Vec<RecordImage<'a, K>, D>,
    completed_limit: u16,
    config_generation: u64,
    resumed_by: &'a str,
    input: Option<(u32, u16, u32, u16)>,
    overlap: Option<(u8, u16, u16, u32)>,
    session_config: SC,
    runtime_config: RC,
}

const MAX: usize = Session::<Open>::SNAPSHOT_MAX;

fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

/// Everything observable of a session, as text.
fn facts(s: &Any) -> String {
    fn of<S: Unfinished>(s: &Session<S>) -> String {
        let ids =
            |it: &mut dyn Iterator<Item = &Id>| it.map(Id::as_str).collect::<Vec<_>>().join(",");
        format!(
            "{:?} {} seq={} turn_seq={} gen={} by={:?} cfg={} last={} limit={} modes={:?} active=[{}] bindings={:?} resources={:?} completed=[{}] deadline={:?} input={:?}/{:?} overlap={}/{:?}",
            s.kind(),
            s.fence(),
            s.input_seq(),
            s.input_turn_seq(),
            s.lease_generation(),
            s.resumed_by(),
            s.config_generation(),
            s.last_activity(),
            s.completed_limit(),
            s.modes(),
            ids(&mut s.active_operations()),
            s.bindings().collect::<Vec<_>>(),
            s.resources().collect::<Vec<_>>(),
            ids(&mut s.completed_operations()),
            s.lease_config(),
            s.pending_input(),
            s.input_limits(),
            s.overlap_speech_ms(),
            s.overlap_config(),
        )
    }
    if let Some(s) = s.as_open() {
        of(s)
    } else if let Some(s) = s.as_detached() {
        format!("{} since={}", of(s), s.state().since())
    } else if let Some(s) = s.as_closing() {
        format!("{} reason={}", of(s), s.state().reason())
    } else {
        let reason = s.close_reason().expect("a closed session has a reason");
        format!("closed {reason} gen={}", s.lease_generation())
    }
}

fn round_trip(s: &Any) -> Any {
    let mut buf = [0u8; MAX];
    let image = s.snapshot(&mut buf).expect("fits in SNAPSHOT_MAX");
    Any::restore(image).expect("a snapshot restores")
}

/// A session with every table in use.
fn busy() -> (Any, Fence) {
    let f = Fence::new(id("kitchen"), 3).with_epoch(2).with_turn(1);
    let opts = OpenOptions::default()
        .modes(Modes::only(InputMode::AppendAudioChunk))
        .completed_limit(5)
        .input_limits(crate::InputLimits::new(64_000, 3))
        .overlap(OverlapConfig::new(OverlapPolicy::Thresholds, 500, 1_000));
    let mut s = Any::from(Session::open(f.clone(), opts, Instant::from_millis(100)).unwrap());
    s.reserve_input(&f, 6_400).unwrap();
    s.decide_overlap(&f, &Overlap::speech(300)).unwrap();
    s.reserve_turn(&f).unwrap();
    s.append(&f, InputMode::AppendAudioChunk).unwrap();
    s.append(&f, InputMode::AppendAudioChunk).unwrap();
    s.bind(&f, 0, &id("llm")).unwrap();
    s.bind(&f, 1, &id("tts")).unwrap();
    s.reserve(&f, 2, &id("voc")).unwrap();
    s.begin_operation(&f, &id("gen"), Instant::from_millis(150))
        .unwrap();
    for op in ["a", "b", "c"] {
        s.record_completed(
            &f,
            &id(op),
            InputMode::AppendAudioChunk,
            Finality::Partial,
            &[1, -2, 3],
        )
        .unwrap();
    }
    (s, f)
}

#[test]
fn every_state_round_trips_with_every_table() {
    let (mut s, f) = busy();
    assert_eq!(facts(&round_trip(&s)), facts(&s));
    s.detach(&f, Instant::from_millis(200)).unwrap();
    assert_eq!(facts(&round_trip(&s)), facts(&s));
    s.begin_close(&f, CloseReason::IdleTtlExpired).unwrap();
    let mut back = round_trip(&s);
    assert_eq!(facts(&back), facts(&s));
    // The restored closing session releases exactly what the original held.
    let a = s.finalize().unwrap();
    let b = back.finalize().unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 3);
}

#[test]
fn a_closed_session_has_nothing_to_persist() {
    let (mut s, f) = busy();
    let _released = s.close(&f, CloseReason::ClientClose).unwrap();
    let mut buf = [0u8; MAX];
    assert!(matches!(
        s.snapshot(&mut buf),
        Err(SnapshotError::Inconsistent(_))
    ));
}

#[test]
fn a_small_buffer_is_refused_and_snapshot_max_suffices() {
    let (s, _) = busy();
    let mut small = [0u8; 8];
    assert_eq!(
        s.snapshot(&mut small).unwrap_err(),
        SnapshotError::BufferTooSmall { needed: MAX }
    );
    // The fullest session of the profile fits in SNAPSHOT_MAX.
    let long = |c: char| core::iter::repeat_n(c, 32).collect::<String>();
    let f = Fence::new(id(&long('s')), u64::MAX)
        .with_epoch(u64::MAX)
        .with_turn(u64::MAX)
        .with_response(u64::MAX);
    let lease = LeaseConfig::new(
        Some(Duration::from_millis(u64::MAX)),
        Duration::from_millis(u64::MAX),
    )
    .unwrap();
    let opts = OpenOptions::default().lease(lease).modes(
        Modes::EMPTY
            .with(InputMode::AppendTokens)
            .with(InputMode::TurnCommitOnly),
    );
    let mut s = Any::from(Session::open(f.clone(), opts, Instant::from_millis(u64::MAX)).unwrap());
    for i in 0..4u8 {
        let name = format!("{}{i}", &long('o')[..31]);
        s.begin_operation(&f, &id(&name), Instant::from_millis(u64::MAX))
            .unwrap();
    }
    for i in 0..8u32 {
        let name = format!("{}{i}", &long('r')[..31]);
        s.reserve(&f, u32::MAX - i, &id(&name)).unwrap();
    }
    for i in 0..8u8 {
        let name = format!("{}{i}", &long('c')[..31]);
        s.record_completed(
            &f,
            &id(&name),
            InputMode::TurnCommitOnly,
            Finality::Final,
            &[i64::MIN; 4],
        )
        .unwrap();
    }
    let mut buf = [0u8; MAX];
    let len = s.snapshot(&mut buf).unwrap().len();
    assert!(len <= MAX, "{len} > {MAX}");
    assert_eq!(facts(&Any::restore(&buf[..len]).unwrap()), facts(&s));
}

/// xorshift64*, deterministic per seed.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// One random operation; its outcome as text.
fn step(s: &mut Any, rng: &mut Rng, base: &Fence) -> String {
    let mut f = s.fence().clone();
    match rng.below(4) {
        0 => f.epoch += rng.below(2),
        1 => f.turn += rng.below(2),
        2 => f.incarnation = base.incarnation + rng.below(2),
        _ => {}
    }
    let now = Instant::from_millis(1_000 + rng.below(100_000));
    let op = id(["a", "b", "c"][rng.below(3) as usize]);
    let mode = InputMode::ALL[rng.below(3) as usize];
    match rng.below(17) {
        16 => format!("{:?}", s.resume_idempotent(&f, rng.below(3), &op, now)),
        0 => format!("{:?}", s.touch(&f, Activity::Heartbeat, now)),
        1 => format!("{:?}", s.begin_operation(&f, &op, now)),
        2 => format!("{:?}", s.end_operation(&f, &op, now)),
        3 | 4 => format!("{:?}", s.append(&f, mode)),
        5 => format!(
            "{:?}",
            s.record_completed(
                &f,
                &op,
                mode,
                Finality::from(rng.below(2) == 0),
                &[i64::try_from(rng.below(9)).unwrap()]
            )
        ),
        6 => format!("{:?}", s.completed(&f, &op, mode, Finality::Partial)),
        7 => format!("{:?}", s.bind(&f, rng.below(5) as u32, &op)),
        8 => format!("{:?}", s.reserve(&f, rng.below(5) as u32, &op)),
        9 => format!("{:?}", s.cancel(&f, &f.clone().with_epoch(f.epoch + 1))),
        10 => format!("{:?}", s.release_fence(&f)),
        11 => format!("{:?}", s.detach(&f, now)),
        12 => format!("{:?}", s.resume(&f, rng.below(3), now)),
        13 => format!("{:?}", s.begin_close(&f, CloseReason::ClientClose)),
        14 => format!("{:?}", s.expire(now)),
        _ => format!("{:?}", s.accept_fence(&f)),
    }
}

#[test]
fn random_operations_behave_the_same_on_a_restored_session() {
    for seed in 1..=200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let base = Fence::new(id("s"), 7);
        let lease = LeaseConfig::new(
            Some(Duration::from_millis(30_000)),
            Duration::from_millis(5_000),
        )
        .unwrap();
        let opts = OpenOptions::default()
            .lease(lease)
            .modes(
                Modes::EMPTY
                    .with(InputMode::AppendTokens)
                    .with(InputMode::AppendAudioChunk),
            )
            .completed_limit(3);
        let mut original = Any::from(
            Session::open(base.clone(), opts.clone(), Instant::from_millis(1_000)).unwrap(),
        );
        let mut restored =
            Any::from(Session::open(base.clone(), opts, Instant::from_millis(1_000)).unwrap());
        for n in 0..60 {
            if original.kind() == crate::StateKind::Closed {
                break;
            }
            // Snapshot + restore at random points; the copy must be equal.
            if rng.below(3) == 0 {
                restored = round_trip(&original);
                assert_eq!(facts(&restored), facts(&original), "seed {seed} step {n}");
            }
            let state = rng.0;
            let out_a = step(&mut original, &mut rng, &base);
            rng.0 = state;
            let out_b = step(&mut restored, &mut rng, &base);
            assert_eq!(out_a, out_b, "seed {seed} step {n}");
            assert_eq!(facts(&original), facts(&restored), "seed {seed} step {n}");
        }
    }
}

#[test]
fn every_truncation_is_refused_without_a_panic() {
    let (s, _) = busy();
    let mut buf = [0u8; MAX];
    let image = s.snapshot(&mut buf).unwrap();
    for len in 0..image.len() {
        assert!(
            Any::restore(&image[..len]).is_err(),
            "a {len}-byte prefix restored"
        );
    }
}

/// A valid image of `busy()`'s session, as fields to break one at a time.
fn encode(image: &Image<'_, (), (), 8, 8, 4, 4>) -> Vec<u8> {
    let mut buf = [0u8; MAX];
    postcard::to_slice(image, &mut buf).unwrap().to_vec()
}

fn decode(bytes: &[u8]) -> Image<'_, (), (), 8, 8, 4, 4> {
    postcard::from_bytes(bytes).unwrap()
}

#[track_caller]
fn refused(bytes: &[u8]) -> SnapshotError {
    Any::restore(bytes).expect_err("a hostile image was restored")
}

#[test]
fn hostile_images_are_refused_with_the_specific_error() {
    let (s, _) = busy();
    let mut buf = [0u8; MAX];
    let good = s.snapshot(&mut buf).unwrap().to_vec();
    assert!(Any::restore(&good).is_ok());

    for version in [1, SNAPSHOT_VERSION + 1] {
        let mut img = decode(&good);
        img.version = version;
        assert_eq!(
            refused(&encode(&img)),
            SnapshotError::Version {
                found: version,
                expected: SNAPSHOT_VERSION
            }
        );
    }

    let mut img = decode(&good);
    img.resumed_by = "x".repeat(33).leak();
    assert!(matches!(
        refused(&encode(&img)),
        SnapshotError::Invalid(Error::InvalidId { .. })
    ));

    for input in [(10, 1, 11, 0), (10, 1, 0, 2)] {
        let mut img = decode(&good);
        img.input = Some(input);
        assert!(matches!(
            refused(&encode(&img)),
            SnapshotError::Inconsistent(_)
        ));
    }
    let mut img = decode(&good);
    img.overlap = Some((3, 700, 1_200, 0));
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Inconsistent("an unknown overlap policy")
    );

    let mut img = decode(&good);
    img.profile[4] = 16;
    assert!(matches!(
        refused(&encode(&img)),
        SnapshotError::Profile { .. }
    ));

    // A table longer than its capacity: nine resources for a table of eight.
    let mut wide: Image<'_, (), (), 9, 8, 4, 4> = postcard::from_bytes(&good).unwrap();
    let names = ["r3", "r4", "r5", "r6", "r7", "r8"];
    for name in names {
        wide.resources
            .push(ResourceImage {
                stage: 9,
                request: name,
                position: PositionImage {
                    epoch: 0,
                    turn: 0,
                    response: 0,
                },
                state: 0,
            })
            .ok()
            .unwrap();
    }
    let mut over = [0u8; 2 * MAX];
    let over = postcard::to_slice(&wide, &mut over).unwrap();
    assert_eq!(refused(over), SnapshotError::Malformed);

    let mut img = decode(&good);
    img.session = "";
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Invalid(Error::InvalidId { len: 0, max: 32 })
    );

    let long = "x".repeat(33);
    let mut img = decode(&good);
    img.resources[0].request = &long;
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Invalid(Error::InvalidId { len: 33, max: 32 })
    );

    // Bytes that are not UTF-8 in an id.
    let mut bad = good.clone();
    let at = bad.windows(7).position(|w| w == b"kitchen").unwrap();
    bad[at] = 0xFF;
    assert_eq!(refused(&bad), SnapshotError::Malformed);

    let mut img = decode(&good);
    img.grace_ms = 0;
    assert!(matches!(
        refused(&encode(&img)),
        SnapshotError::Invalid(Error::InvalidConfig { .. })
    ));

    // Two bindings on one stage.
    let mut img = decode(&good);
    img.resources[1].stage = img.resources[0].stage;
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Inconsistent("two bindings share a place or a stage")
    );

    // A binding place beyond the bound stages, and a count that disagrees.
    let mut img = decode(&good);
    img.bound = 1;
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Inconsistent("a binding place beyond the bound stages")
    );

    // The same resource twice.
    let mut img = decode(&good);
    img.resources[2].stage = img.resources[0].stage;
    img.resources[2].request = img.resources[0].request;
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Inconsistent("a resource appears twice")
    );

    // A cursor that cannot arise: more appends in the turn than in the epoch.
    let mut img = decode(&good);
    img.cursor[1] = img.cursor[0] + 1;
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Inconsistent("an append cursor that cannot arise")
    );

    // More completed appends than the limit; the same operation twice.
    let mut img = decode(&good);
    img.completed_limit = 2;
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Inconsistent("more completed appends than the limit")
    );
    let mut img = decode(&good);
    img.completed[1].op = img.completed[0].op;
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Inconsistent("a completed append appears twice")
    );

    // Unknown modes, an unknown meta flag.
    let mut img = decode(&good);
    img.modes = 0xFF;
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Inconsistent("unknown input modes")
    );
    let mut img = decode(&good);
    img.completed[0].meta |= 0x80;
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Inconsistent("a completed append with an unknown mode or flag")
    );

    // Closing with an operation still active; closing with generation 0.
    let mut img = decode(&good);
    img.state = StateImage::Closing { reason: 0 };
    img.generation = 1;
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Inconsistent(
            "a closing session with active operations or a generation that closing never reached"
        )
    );
    let mut img = decode(&good);
    img.state = StateImage::Closing { reason: 0 };
    img.active.clear();
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Inconsistent(
            "a closing session with active operations or a generation that closing never reached"
        )
    );
    // An unknown close reason.
    let mut img = decode(&good);
    img.state = StateImage::Closing { reason: 9 };
    img.active.clear();
    img.generation = 1;
    assert_eq!(
        refused(&encode(&img)),
        SnapshotError::Inconsistent("an unknown close reason")
    );

    // A binding whose fence this session never held: bound in a later
    // epoch, or later in the same epoch, than the session has reached.
    for (epoch, turn, response) in [(1, 0, 0), (0, 1, 0), (0, 0, 1)] {
        let mut img = decode(&good);
        let bound = img.resources.iter_mut().find(|r| r.state > 1).unwrap();
        bound.position = PositionImage {
            epoch: img.epoch + epoch,
            turn: img.turn + turn,
            response: img.response + response,
        };
        assert_eq!(
            refused(&encode(&img)),
            SnapshotError::Inconsistent(
                "a binding ahead of the session's fence, bound under a fence this session never held"
            )
        );
    }

    // And the unchanged image still restores (the edits were to copies).
    let _ = RequestState::Reserved;
    assert!(Any::restore(&good).is_ok());
}

/// The facts of [`busy`]'s session as an image from before version 4
/// restores them: the default limits, nothing pending.
fn without_extras(facts: &str, version: u8) -> String {
    let mut facts = String::from(facts);
    let mut forget = |busy: &str, default: &str| {
        assert!(facts.contains(busy), "{facts}");
        facts = facts.replace(busy, default);
    };
    forget(
        "overlap=300/OverlapConfig { policy: Thresholds, short_ack_ms: 500, barge_in_ms: 1000 }",
        "overlap=0/OverlapConfig { policy: ListenOnly, short_ack_ms: 700, barge_in_ms: 1200 }",
    );
    if version < 4 {
        forget(
            "input=PendingInput { bytes: 6400, turns: 1 }/InputLimits { bytes: 64000, turns: 3 }",
            "input=PendingInput { bytes: 0, turns: 0 }/InputLimits { bytes: 16777216, turns: 4 }",
        );
    }
    facts
}

/// The image of version 2: the same fields, without the control id of the
/// last resume.
#[derive(Serialize)]
struct ImageV2<'a> {
    version: u8,
    profile: [u16; 6],
    state: StateImage,
    session: &'a str,
    fence: [u64; 4],
    lease: [u64; 4],
    active: heapless::Vec<&'a str, 4>,
    modes: u8,
    cursor: [u64; 4],
    resources: heapless::Vec<ResourceImage<'a>, 8>,
    bound: u8,
    completed: heapless::Vec<RecordImage<'a, 4>, 8>,
    completed_limit: u16,
    config_generation: u64,
    session_config: (),
    runtime_config: (),
}

#[test]
fn an_image_of_version_2_still_restores() {
    let (mut s, f) = busy();
    s.resume_idempotent(&f, 0, &id("ctl"), Instant::from_millis(200))
        .unwrap();
    let mut buf = [0u8; MAX];
    let good = s.snapshot(&mut buf).unwrap().to_vec();
    let img = decode(&good);
    assert_eq!(img.resumed_by, "ctl");
    let old = ImageV2 {
        version: 2,
        profile: img.profile,
        state: img.state,
        session: img.session,
        fence: [img.incarnation, img.epoch, img.turn, img.response],
        lease: [
            img.idle_ttl_ms,
            img.grace_ms,
            img.generation,
            img.last_activity_ms,
        ],
        active: img.active,
        modes: img.modes,
        cursor: img.cursor,
        resources: img.resources,
        bound: img.bound,
        completed: img.completed,
        completed_limit: img.completed_limit,
        config_generation: img.config_generation,
        session_config: (),
        runtime_config: (),
    };
    let mut old_buf = [0u8; MAX];
    let old = postcard::to_slice(&old, &mut old_buf).unwrap();
    let restored = Any::restore(old).expect("a version 2 image restores");
    // Everything but the control id, which version 2 did not keep.
    assert_eq!(restored.resumed_by(), None);
    assert_eq!(
        facts(&restored),
        without_extras(&facts(&s), 2).replace("by=Some(\"ctl\")", "by=None")
    );
    // And it is written back as the current version.
    assert_eq!(restored.snapshot(&mut buf).unwrap()[0], SNAPSHOT_VERSION);
}

#[test]
fn images_of_versions_3_and_4_restore_with_the_defaults() {
    let (s, _) = busy();
    let mut buf = [0u8; MAX];
    let good = s.snapshot(&mut buf).unwrap().to_vec();
    let img = decode(&good);
    assert_eq!(img.input, Some((64_000, 3, 6_400, 1)));
    assert_eq!(img.overlap, Some((2, 500, 1_000, 300)));
    // Version 3 ended with the control id, version 4 with the input (the
    // configurations here serialize to nothing): the image without the
    // later sections.
    let mut tail = [0u8; 32];
    let overlap = postcard::to_slice(&img.overlap, &mut tail).unwrap().len();
    let input = postcard::to_slice(&img.input, &mut tail).unwrap().len();
    for (version, cut) in [(4, overlap), (3, overlap + input)] {
        let mut old = good[..good.len() - cut].to_vec();
        old[0] = version;
        let restored = Any::restore(&old).expect("an older image restores");
        assert_eq!(facts(&restored), without_extras(&facts(&s), version));
    }
}

#[test]
fn a_session_at_the_default_input_limits_spends_one_byte_on_them() {
    let f = Fence::new(id("mic"), 0);
    let mut s = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO).unwrap();
    let mut buf = [0u8; MAX];
    let idle = s.snapshot(&mut buf).unwrap().to_vec();
    assert_eq!(decode(&idle).input, None);
    s.reserve_input(&f, 640).unwrap();
    let holding = s.snapshot(&mut buf).unwrap().to_vec();
    let limits = crate::InputLimits::DEFAULT;
    assert_eq!(
        decode(&holding).input,
        Some((limits.bytes(), limits.turns(), 640, 0))
    );
    assert_eq!(holding.len(), idle.len() + 8);
    s.release_input(640);
    assert_eq!(s.snapshot(&mut buf).unwrap(), &idle[..]);
    // The overlap section is one byte too, at the defaults; a tag that is
    // neither 0 nor 1, in either section, is no image.
    assert_eq!(decode(&idle).overlap, None);
    for at in [idle.len() - 2, idle.len() - 1] {
        let mut bad = idle.clone();
        bad[at] = 2;
        assert_eq!(refused(&bad), SnapshotError::Malformed);
    }
}
