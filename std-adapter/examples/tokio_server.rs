//! A voice server's session side on tokio: one `SharedManager` for every
//! connection task, admission through permits (a handshake that is
//! cancelled gives its slot back), and the reaper as a task that closes
//! sessions whose client never came back and hands their engine requests
//! to the host to cancel.
//!
//! Eight "connections" run at once against a server admitting six: two
//! are refused at admission, one handshake is cancelled, some callers
//! hang up, and some lose their link and never return (the reaper
//! expires them after the 300 ms grace).
//!
//! `cargo run -p duplex-std --example tokio_server --features tokio`

use std::sync::Arc;
use std::time::Duration as StdDuration;

use duplex_core::{
    CloseReason, Duration, ErrorKind, Fence, Id, InputMode, LeaseConfig, Modes, OpenOptions,
};
use duplex_std::{ManagerConfig, Sessions, SharedManager, TokioClock};

type Manager = SharedManager<TokioClock>;

/// What one connection does after its handshake.
#[derive(Debug, Clone, Copy)]
enum Caller {
    /// Streams, gets an answer, says goodbye.
    HangsUp,
    /// Streams, then the link drops for good.
    Vanishes,
    /// The handshake is cancelled before the session opens.
    GivesUp,
}

async fn connection(m: Arc<Manager>, n: usize, caller: Caller) -> Result<String, String> {
    // Admission first: the slot is held while the handshake runs, and
    // given back if this task ends before the session opens.
    let permit = match m.admit() {
        Ok(permit) => permit,
        Err(e) if e.kind() == ErrorKind::CapacityExhausted => {
            return Ok(format!("call-{n}: refused, the server is full"));
        }
        Err(e) => return Err(e.to_string()),
    };
    tokio::time::sleep(StdDuration::from_millis(10)).await; // the handshake
    if let Caller::GivesUp = caller {
        drop(permit);
        return Ok(format!("call-{n}: handshake cancelled, slot given back"));
    }
    let fence = Fence::new(Id::new(&format!("call-{n}")).map_err(|e| e.to_string())?, 0);
    let lease = LeaseConfig::new(Some(Duration::from_secs(30)), Duration::from_millis(300))
        .map_err(|e| e.to_string())?;
    let opts = OpenOptions::default()
        .modes(Modes::only(InputMode::AppendAudioChunk))
        .lease(lease);
    permit
        .open(fence.clone(), opts)
        .map_err(|e| e.to_string())?;

    // 20 ms chunks; the engine answers.
    for _ in 0..5 {
        m.append(&fence, InputMode::AppendAudioChunk)
            .map_err(|e| e.to_string())?;
        tokio::time::sleep(StdDuration::from_millis(20)).await;
    }
    m.bind(&fence, 0, format!("tts-{n}"))
        .map_err(|e| e.to_string())?;
    match caller {
        Caller::HangsUp => {
            let released = m
                .close(&fence, CloseReason::ClientClose)
                .map_err(|e| e.to_string())?;
            let n_released = released.map_or(0, |ids| ids.len());
            Ok(format!(
                "call-{n}: hung up, {n_released} engine request(s) to cancel"
            ))
        }
        Caller::Vanishes => {
            m.detach(&fence).map_err(|e| e.to_string())?;
            Ok(format!("call-{n}: link lost, waiting for the reaper"))
        }
        Caller::GivesUp => unreachable!("handled before the open"),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = ManagerConfig {
        max_sessions: Some(6),
        ..ManagerConfig::default()
    };
    let m = Arc::new(Manager::new(TokioClock::new(), config)?);

    // The reaper: wakes at the next deadline (never on a fixed tick) and
    // hands each expired session's engine requests to the host.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let reaper = tokio::spawn(Arc::clone(&m).reap(
        |expiry| {
            println!(
                "reaper: {} closed ({}), {} engine request(s) to cancel",
                expiry.session,
                expiry.reason.as_str(),
                expiry.submitted.len() + expiry.reserved.len()
            );
        },
        async {
            let _ = stopped.await;
        },
    ));

    let callers = [
        Caller::HangsUp,
        Caller::Vanishes,
        Caller::GivesUp,
        Caller::HangsUp,
        Caller::Vanishes,
        Caller::HangsUp,
        Caller::HangsUp,
        Caller::Vanishes,
    ];
    let tasks: Vec<_> = callers
        .iter()
        .enumerate()
        .map(|(n, caller)| tokio::spawn(connection(Arc::clone(&m), n, *caller)))
        .collect();
    for task in tasks {
        println!("{}", task.await??);
    }
    println!(
        "after the calls: {} session(s) held, {} slot(s) taken",
        m.len(),
        m.reserved()
    );

    // Past the grace: the reaper has closed every session that vanished.
    tokio::time::sleep(StdDuration::from_millis(500)).await;
    let _ = stop.send(());
    let stats = reaper.await?;
    println!(
        "reaper: {} expired, {} wake(s), {} idle; {} session(s) left",
        stats.expired,
        stats.wakes,
        stats.idle_wakes,
        m.len()
    );
    assert!(m.is_empty() && m.reserved() == 0);
    Ok(())
}
