//! A throwaway `redis-server`: started from `PATH` on a free local port,
//! in memory only (no RDB, no AOF), stopped when dropped.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why a `redis-server` could not be started.
#[derive(Debug, thiserror::Error)]
pub enum RedisServerError {
    /// `redis-server` is not on `PATH` (Debian: `apt-get install redis-server`).
    #[error("redis-server is not on PATH (install it: apt-get install redis-server): {0}")]
    NotFound(std::io::Error),
    /// No free port, or the server did not start listening in time.
    #[error("redis-server did not start: {0}")]
    Start(String),
}

/// A running `redis-server`, killed when dropped.
///
/// ```no_run
/// let redis = duplex_gateway::cluster::RedisServer::start()?;
/// println!("{}", redis.url());
/// # Ok::<(), duplex_gateway::cluster::RedisServerError>(())
/// ```
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    /// Whether `redis-server` can be run from `PATH`.
    pub fn available() -> bool {
        Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Starts one on a free port of 127.0.0.1 and waits until it accepts
    /// connections.
    ///
    /// # Errors
    ///
    /// [`RedisServerError`]: not installed, or not listening within 10 s.
    pub fn start() -> Result<Self, RedisServerError> {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| RedisServerError::Start(format!("no free port: {e}")))?
            .port();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(RedisServerError::NotFound)?;
        let mut server = RedisServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(RedisServerError::Start(format!("exited with {status}")));
            }
            if Instant::now() > deadline {
                return Err(RedisServerError::Start(format!(
                    "not listening on port {port} after 10 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its URL, `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
