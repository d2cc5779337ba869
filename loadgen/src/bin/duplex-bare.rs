//! `duplex-bare`: the limit the gateway is measured against. A bare
//! WebSocket server on the same stack as the gateway (tokio's
//! multi-threaded runtime, tokio-tungstenite, serde_json) that does the
//! least a voice gateway must: parse every text message as JSON and answer
//! it with a short JSON acknowledgement (about 80 bytes) naming its
//! `event_id`. No session, no journal, no audit, no engine: whatever the
//! gateway costs beyond this is its own (BENCHMARKS.md, "The limit").
//!
//! ```text
//! duplex-bare --listen 127.0.0.1:0     # prints "bare: listening on ws://ADDR"
//! ```

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use duplex_gateway::protocol::READ_BUFFER;

/// A bare WebSocket server: every text message parsed, each answered.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Where to listen (port 0: any free port, printed).
    #[arg(long, default_value = "127.0.0.1:8790")]
    listen: SocketAddr,
}

/// What the server reads of a message: its type and `event_id` (the rest,
/// the audio among it, is parsed and skipped, as a gateway's decoder
/// would).
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    event_id: Option<Cow<'a, str>>,
}

/// The acknowledgement.
#[derive(Serialize)]
struct Ack<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    event_id: &'a str,
    of: &'a str,
    seq: u64,
}

async fn serve(stream: TcpStream, answered: Arc<AtomicU64>) {
    let _ = stream.set_nodelay(true);
    // The gateway's read buffer (tungstenite's default, 128 KiB, is zeroed
    // at every read: most of a small message's cost).
    let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER);
    let Ok(ws) = tokio_tungstenite::accept_async_with_config(stream, Some(config)).await else {
        return;
    };
    let (mut tx, mut rx) = ws.split();
    let mut seq: u64 = 0;
    while let Some(Ok(message)) = rx.next().await {
        let answer = match &message {
            Message::Text(text) => match serde_json::from_str::<Event<'_>>(text.as_str()) {
                Ok(event) => {
                    seq += 1;
                    let ack = Ack {
                        kind: "ack",
                        event_id: event.event_id.as_deref().unwrap_or(""),
                        of: event.kind.as_deref().unwrap_or(""),
                        seq,
                    };
                    serde_json::to_string(&ack).unwrap_or_default()
                }
                Err(_) => r#"{"type":"error","code":"invalid_json"}"#.to_owned(),
            },
            Message::Close(_) => break,
            _ => continue,
        };
        if tx.send(Message::text(answer)).await.is_err() {
            break;
        }
        answered.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let listener = TcpListener::bind(args.listen).await?;
    println!("bare: listening on ws://{}", listener.local_addr()?);
    let answered = Arc::new(AtomicU64::new(0));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    tokio::spawn(serve(stream, Arc::clone(&answered)));
                }
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    println!("bare: answered={}", answered.load(Ordering::Relaxed));
    Ok(())
}
