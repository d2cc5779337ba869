//! A model behind the gateway: a parrot that says each turn's audio back.
//!
//! ```text
//! cargo run --release -p duplex-gateway --example parrot -- 127.0.0.1:8787
//! ```
//!
//! Then open <http://127.0.0.1:8787/>, press "Talk" and speak: after each
//! commit the page plays your own voice back. Speak over it and it stops
//! (a barge-in cancels the answer, and the gateway drops its future).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use duplex_gateway::engine::{Engine, Input, Reply, Sink, Turn};
use duplex_gateway::{Config, Gateway};

/// 20 ms of 16 kHz, 16-bit mono audio.
const PIECE: usize = 640;

/// What each session said since its last answer.
#[derive(Debug, Default)]
pub struct Parrot {
    heard: Mutex<HashMap<String, Vec<u8>>>,
}

impl Parrot {
    fn heard(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<u8>>> {
        self.heard.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Engine for Parrot {
    fn audio(&self, input: Input<'_>) {
        let mut heard = self.heard();
        let said = heard.entry(input.session.to_owned()).or_default();
        said.extend_from_slice(input.audio);
    }

    fn respond(&self, turn: Turn, mut sink: Sink) -> Reply {
        let said = self.heard().remove(&turn.session).unwrap_or_default();
        Box::pin(async move {
            // Spoken at the pace it was heard: a piece every 20 ms.
            for piece in said.chunks(PIECE) {
                sink.audio(piece).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    }

    fn ended(&self, session: &str) {
        self.heard().remove(session);
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8787".into());
    let config = Config {
        engine: Arc::new(Parrot::default()),
        ..Config::default()
    };
    let gateway = Gateway::new(config)?;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    // The page is at http://ADDR/; the line's form is what tests look for.
    println!("parrot: listening on ws://{}", listener.local_addr()?);
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    println!("{}", gateway.serve(listener, stop).await.line());
    Ok(())
}
