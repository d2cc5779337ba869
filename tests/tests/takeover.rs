//! Takeover races between two connections of one session, under threads:
//! what a host that resumes sessions on new sockets relies on.

use std::sync::{Arc, Barrier};
use std::thread;

use duplex_core::{CloseReason, ErrorKind, Fence, Id, StateKind};
use duplex_core::{InputMode, Modes, OpenOptions};
use duplex_std::Sessions as _;
use duplex_std::{ManagerConfig, MonotonicClock, SharedManager};

fn id(s: &str) -> Id {
    Id::new(s).expect("valid id")
}

fn options() -> OpenOptions {
    OpenOptions::default().modes(Modes::only(InputMode::AppendAudioChunk))
}

/// A connection that lost a takeover race (a client reconnected on another
/// socket and resumed while the old socket was still closing) never closes
/// its successor's session: the close carries the generation its connection
/// was handed, checked under the lock that closes. Two threads race each
/// round: one resumes, one closes with the old generation. Either the close
/// came first (it succeeds and the resume finds nothing), or the resume did
/// (the close is refused and the session stays, held by the new
/// generation); never a close of the resumed session.
#[test]
fn a_superseded_connection_never_closes_its_successor() {
    let m = Arc::new(SharedManager::new(MonotonicClock::new(), ManagerConfig::default()).unwrap());
    let (mut closed_first, mut resumed_first) = (0, 0);
    for round in 0..400 {
        let f = Fence::new(id(&format!("race-{round}")), 0);
        m.open(f.clone(), options()).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let resumer = {
            let (m, f, barrier) = (Arc::clone(&m), f.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                m.resume(&f, 0)
            })
        };
        barrier.wait();
        let closed = m.close_generation(&f, 0, CloseReason::ClientClose);
        let resumed = resumer.join().unwrap();
        match (closed, resumed) {
            (Ok(Some(_)), Err(e)) => {
                assert_eq!(e.kind(), ErrorKind::UnknownSession, "round {round}");
                assert!(
                    m.with_session(&f.session, duplex_core::AnySession::kind)
                        .is_none(),
                    "round {round}"
                );
                closed_first += 1;
            }
            (Err(e), Ok(1)) => {
                assert_eq!(e.kind(), ErrorKind::GenerationMismatch, "round {round}");
                assert_eq!(
                    m.with_session(&f.session, |s| (s.kind(), s.lease_generation())),
                    Some((StateKind::Open, 1)),
                    "round {round}: the resumed session is untouched"
                );
                resumed_first += 1;
                let _ = m.close_generation(&f, 1, CloseReason::ClientClose).unwrap();
            }
            other => panic!("round {round}: {other:?}"),
        }
    }
    assert_eq!(closed_first + resumed_first, 400);
    assert!(m.is_empty());
}
