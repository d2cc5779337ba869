//! The conformance runner: executes trace files (`shared/conformance/FORMAT.md`)
//! against a fresh [`SessionManager`] driven by a manual clock and compares
//! every outcome with the trace's expectation.

use duplex_core::profile::Conformance;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use duplex_core::profile::conformance;
use duplex_core::{
    Activity, Clock, Duration, ErrorKind, Fence, Finality, Id, Instant, LeaseConfig, ManualClock,
    Modes, OpenOptions, RequestIds, RequestState, Reservation, StateKind,
};
use duplex_std::Sessions as _;
use duplex_std::{ManagerConfig, SessionManager, SessionView};
use serde_json::{json, Map, Value};

mod extensions;
mod json;
use json::{
    appended_json, bad, bool_of, fence_json, fence_of, field, ids_json, mode_of, reason_of,
    session_of, snapshot_json, str_of, strings, u64_of,
};

/// The capacity profile this build runs (the default, conformance
/// profile), as the traces' `profile` lines write it.
pub const PROFILE: [(&str, usize); 6] = [
    ("max_resources", conformance::RESOURCES),
    ("max_bindings", conformance::BINDINGS),
    ("max_completed", conformance::COMPLETED),
    ("max_active_ops", conformance::ACTIVE_OPS),
    ("max_id_len", conformance::ID_LEN),
    ("max_stage_results", conformance::STAGE_RESULTS),
];

/// A manual clock shared between the runner (which advances it) and the
/// manager (which reads it).
#[derive(Clone, Debug, Default)]
pub struct SharedClock(Rc<ManualClock>);

impl Clock for SharedClock {
    fn now(&self) -> Instant {
        self.0.now()
    }
}

type Manager = SessionManager<SharedClock, Conformance<Value, Value>>;

/// A line that cannot be run: malformed JSON, a missing field, an unknown op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

type Outcome = Result<Value, ErrorKind>;

const UNKNOWN: Outcome = Err(ErrorKind::UnknownSession);

/// Runs one trace against one manager, line by line.
#[derive(Debug)]
pub struct Runner {
    clock: SharedClock,
    manager: Manager,
    handles: HashMap<String, Reservation>,
    /// What the last `manager` line gives every session it opens.
    extras: extensions::Extras,
}

impl Default for Runner {
    fn default() -> Self {
        Runner::new()
    }
}

impl Runner {
    /// A runner with a default manager at time zero.
    ///
    /// # Panics
    ///
    /// Never: the default manager configuration is valid.
    pub fn new() -> Self {
        let clock = SharedClock::default();
        let manager = Manager::with_capacities(clock.clone(), ManagerConfig::default())
            .expect("the default config is valid");
        Runner {
            clock,
            manager,
            handles: HashMap::new(),
            extras: extensions::Extras::default(),
        }
    }

    /// Runs one operation. `Ok(None)` for lines without an outcome
    /// (`comment`, `profile`).
    ///
    /// # Errors
    ///
    /// A [`ParseError`] if the line is not a valid operation, or a `profile`
    /// that differs from [`PROFILE`].
    pub fn run(&mut self, op: &Map<String, Value>) -> Result<Option<Outcome>, ParseError> {
        let name = str_of(field(op, "op")?, "op")?;
        let outcome =
            match name {
                "comment" => return Ok(None),
                "profile" => {
                    for (key, want) in PROFILE {
                        let got = u64_of(field(op, key)?, key)?;
                        if usize::try_from(got).ok() != Some(want) {
                            return Err(bad(format!(
                                "profile mismatch: trace has {key} = {got}, this build has {want}"
                            )));
                        }
                    }
                    return Ok(None);
                }
                "manager" => self.op_manager(op)?,
                "advance" => {
                    self.clock
                        .0
                        .advance(Duration::from_millis(u64_of(field(op, "ms")?, "ms")?));
                    Ok(Value::Null)
                }
                "open" => self.op_open(op)?,
                "close" => {
                    let reason = reason_of(op)?;
                    match fence_of(field(op, "fence")?)? {
                        None => Ok(json!({"closed": false, "ids": []})),
                        Some(f) => match self.manager.close(&f, reason) {
                            Ok(None) => Ok(json!({"closed": false, "ids": []})),
                            Ok(Some(ids)) => Ok(json!({"closed": true, "ids": ids_json(&ids)})),
                            Err(e) => Err(e.kind()),
                        },
                    }
                }
                "commit_append" => {
                    let handle = str_of(field(op, "handle")?, "handle")?;
                    let r = self
                        .handles
                        .get(handle)
                        .ok_or_else(|| bad(format!("unknown handle {handle:?}")))?;
                    self.manager
                        .commit_append(r)
                        .map(appended_json)
                        .map_err(|e| e.kind())
                }
                "collect_expired" => {
                    let excluded: Vec<Id> = match op.get("excluded") {
                        None => Vec::new(),
                        Some(v) => strings(v, "excluded")?
                            .into_iter()
                            .filter_map(|s| Id::new(s).ok())
                            .collect(),
                    };
                    let mut records: Vec<Value> = self
                        .manager
                        .collect_expired(&excluded)
                        .iter()
                        .map(|e| {
                            json!({
                                "session": e.session.as_str(),
                                "reason": e.reason.as_str(),
                                "lease_generation": e.lease_generation,
                                "fence": fence_json(&e.fence),
                                "submitted": ids_json(&e.submitted),
                                "reserved": ids_json(&e.reserved),
                            })
                        })
                        .collect();
                    records.sort_by(|a, b| a["session"].as_str().cmp(&b["session"].as_str()));
                    Ok(json!({ "expired": records }))
                }
                "close_for_requests" => {
                    let ids = strings(field(op, "request_ids")?, "request_ids")?;
                    let closing: Map<String, Value> = self
                        .manager
                        .close_for_requests(&ids)
                        .iter()
                        .map(|r| (r.session.as_str().to_owned(), ids_json(&r.ids)))
                        .collect();
                    Ok(json!({ "closing": closing }))
                }
                "finalize_closed" => {
                    let ids: Vec<Id> = strings(field(op, "sessions")?, "sessions")?
                        .into_iter()
                        .filter_map(|s| Id::new(s).ok())
                        .collect();
                    let mut done: Vec<&str> = Vec::new();
                    let finalized = self.manager.finalize_closed(&ids);
                    done.extend(finalized.iter().map(|r| r.session.as_str()));
                    done.sort_unstable();
                    Ok(json!({ "finalized": done }))
                }
                "inspect" => {
                    match session_of(field(op, "session")?)?.and_then(|s| self.manager.get(&s)) {
                        None => Ok(json!({"absent": true})),
                        Some(s) => Ok(SessionView::of(s)
                            .map_or(json!({"absent": true}), |v| snapshot_json(&v))),
                    }
                }
                "sessions" => {
                    let mut ids: Vec<&str> = self.manager.session_ids().map(Id::as_str).collect();
                    ids.sort_unstable();
                    Ok(json!({ "sessions": ids }))
                }
                "stage_ids" | "resource_ids" | "release" | "finalize" | "replace_configs" => {
                    match session_of(field(op, "session")?)? {
                        None => UNKNOWN,
                        Some(session) => self.by_session(name, &session, op)?,
                    }
                }
                "cancel" => match fence_of(field(op, "cancelled")?)? {
                    None => UNKNOWN,
                    Some(cancelled) => match fence_of(field(op, "next")?)? {
                        Some(next) => self
                            .manager
                            .cancel(&cancelled, &next)
                            .map(|ids| json!({"ids": ids_json(&ids)}))
                            .map_err(|e| e.kind()),
                        // An unnameable next session can never match.
                        None => match self.manager.get(&cancelled.session) {
                            None => UNKNOWN,
                            Some(s) if s.kind() == StateKind::Closing => Err(ErrorKind::WrongState),
                            Some(_) => Err(ErrorKind::FenceMismatch),
                        },
                    },
                },
                name if extensions::OPS.contains(&name) => self.op_extension(name, op)?,
                _ => match fence_of(field(op, "fence")?)? {
                    None => {
                        // Still reject unknown ops and malformed fields.
                        Self::check_known(name)?;
                        UNKNOWN
                    }
                    Some(fence) => self.by_fence(name, &fence, op)?,
                },
            };
        Ok(Some(outcome))
    }

    fn check_known(name: &str) -> Result<(), ParseError> {
        const BY_FENCE: [&str; 14] = [
            "touch",
            "detach",
            "resume",
            "begin_op",
            "end_op",
            "append",
            "prepare_append",
            "completed",
            "record_completed",
            "reserve",
            "bind",
            "release_fence",
            "accept_fence",
            "begin_close",
        ];
        if BY_FENCE.contains(&name) {
            Ok(())
        } else {
            Err(bad(format!("unknown op {name:?}")))
        }
    }

    fn op_manager(&mut self, op: &Map<String, Value>) -> Result<Outcome, ParseError> {
        let max_sessions = match op.get("max_sessions") {
            None | Some(Value::Null) => None,
            Some(v) => Some(usize::try_from(u64_of(v, "max_sessions")?).unwrap_or(usize::MAX)),
        };
        let limit = match op.get("completed_append_limit") {
            None => 8,
            Some(v) => usize::try_from(u64_of(v, "completed_append_limit")?).unwrap_or(usize::MAX),
        };
        let start = match op.get("start_ms") {
            None => 0,
            Some(v) => u64_of(v, "start_ms")?,
        };
        let extras = extensions::Extras::of(op)?;
        let clock = SharedClock(Rc::new(ManualClock::new(Instant::from_millis(start))));
        let config = ManagerConfig {
            max_sessions,
            completed_append_limit: Some(limit),
        };
        Ok(match Manager::with_capacities(clock.clone(), config) {
            Ok(manager) => {
                self.clock = clock;
                self.manager = manager;
                self.handles.clear();
                self.extras = extras;
                Ok(Value::Null)
            }
            Err(e) => Err(e.kind()),
        })
    }

    fn op_open(&mut self, op: &Map<String, Value>) -> Result<Outcome, ParseError> {
        let Some(fence) = fence_of(field(op, "fence")?)? else {
            return Ok(Err(ErrorKind::InvalidId));
        };
        let modes = match op.get("modes") {
            None | Some(Value::Null) => Modes::default(),
            Some(v) => {
                let list = v
                    .as_array()
                    .ok_or_else(|| bad("`modes` must be an array"))?;
                list.iter().map(mode_of).collect::<Result<Modes, _>>()?
            }
        };
        let idle_ttl = match op.get("idle_ttl_ms") {
            None => Some(Duration::from_millis(300_000)),
            Some(Value::Null) => None,
            Some(v) => Some(Duration::from_millis(u64_of(v, "idle_ttl_ms")?)),
        };
        let grace = match op.get("grace_ms") {
            None => Duration::from_millis(30_000),
            Some(v) => Duration::from_millis(u64_of(v, "grace_ms")?),
        };
        let lease = match LeaseConfig::new(idle_ttl, grace) {
            Ok(lease) => lease,
            Err(e) => return Ok(Err(e.kind())),
        };
        let configs = self.extras.apply(OpenOptions::new(
            op.get("session_config").cloned().unwrap_or(Value::Null),
            op.get("runtime_config").cloned().unwrap_or(Value::Null),
        ));
        Ok(self
            .manager
            .open(fence, configs.modes(modes).lease(lease))
            .map(|()| Value::Null)
            .map_err(|e| e.kind()))
    }

    fn by_session(
        &mut self,
        name: &str,
        session: &Id,
        op: &Map<String, Value>,
    ) -> Result<Outcome, ParseError> {
        let m = &mut self.manager;
        let filter = match op.get("fence") {
            None | Some(Value::Null) => None,
            Some(v) => Some(fence_of(v)?),
        };
        Ok(match name {
            "stage_ids" | "resource_ids" => {
                let submitted = match op.get("submitted") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(if bool_of(v, "submitted")? {
                        RequestState::Submitted
                    } else {
                        RequestState::Reserved
                    }),
                };
                let ids = match filter {
                    // A filter fence whose id names no session matches nothing.
                    Some(None) => m
                        .get(session)
                        .map(|_| RequestIds::new())
                        .ok_or(ErrorKind::UnknownSession),
                    filter => {
                        let filter = filter.flatten();
                        let ids = if name == "stage_ids" {
                            m.stage_request_ids(session, filter.as_ref())
                        } else {
                            m.resource_request_ids(session, filter.as_ref(), submitted)
                        };
                        ids.map_err(|e| e.kind())
                    }
                };
                ids.map(|ids| json!({"ids": ids_json(&ids)}))
            }
            "release" => {
                let ids = strings(field(op, "request_ids")?, "request_ids")?;
                m.release(session, &ids)
                    .map(|()| Value::Null)
                    .map_err(|e| e.kind())
            }
            "finalize" => m
                .finalize(session)
                .map(|ids| json!({"ids": ids_json(&ids)}))
                .map_err(|e| e.kind()),
            "replace_configs" => m
                .replace_configs(
                    session,
                    op.get("session_config").cloned(),
                    op.get("runtime_config").cloned(),
                )
                .map(|g| json!({"config_generation": g}))
                .map_err(|e| e.kind()),
            _ => return Err(bad(format!("unknown op {name:?}"))),
        })
    }

    fn by_fence(
        &mut self,
        name: &str,
        f: &Fence,
        op: &Map<String, Value>,
    ) -> Result<Outcome, ParseError> {
        let m = &mut self.manager;
        let null = |r: Result<(), duplex_std::Error>| r.map(|()| Value::Null).map_err(|e| e.kind());
        Ok(match name {
            "touch" => {
                let name = str_of(field(op, "activity")?, "activity")?;
                let activity = Activity::parse(name)
                    .ok_or_else(|| bad(format!("unknown activity {name:?}")))?;
                null(m.touch(f, activity))
            }
            "detach" => null(m.detach(f)),
            "resume" => m
                .resume(
                    f,
                    u64_of(field(op, "expected_generation")?, "expected_generation")?,
                )
                .map(|g| json!({"generation": g}))
                .map_err(|e| e.kind()),
            "begin_op" => {
                null(m.begin_operation(f, str_of(field(op, "operation_id")?, "operation_id")?))
            }
            "end_op" => {
                null(m.end_operation(f, str_of(field(op, "operation_id")?, "operation_id")?))
            }
            "append" => m
                .append(f, mode_of(field(op, "mode")?)?)
                .map(appended_json)
                .map_err(|e| e.kind()),
            "prepare_append" => {
                let handle = str_of(field(op, "handle")?, "handle")?.to_owned();
                match m.prepare_append(f, mode_of(field(op, "mode")?)?) {
                    Ok(r) => {
                        let out = appended_json(r.on_commit());
                        self.handles.insert(handle, r);
                        Ok(out)
                    }
                    Err(e) => Err(e.kind()),
                }
            }
            "completed" => {
                let finality = Finality::from(bool_of(field(op, "final")?, "final")?);
                let mode = mode_of(field(op, "mode")?)?;
                m.completed(
                    f,
                    str_of(field(op, "operation_id")?, "operation_id")?,
                    mode,
                    finality,
                )
                .map(|r| json!({"results": r.as_deref()}))
                .map_err(|e| e.kind())
            }
            "record_completed" => {
                let results = field(op, "results")?
                    .as_array()
                    .ok_or_else(|| bad("`results` must be an array of integers"))?
                    .iter()
                    .map(|v| {
                        v.as_i64()
                            .ok_or_else(|| bad(format!("stage result {v} is not an integer")))
                    })
                    .collect::<Result<Vec<i64>, _>>()?;
                let finality = Finality::from(bool_of(field(op, "final")?, "final")?);
                let mode = mode_of(field(op, "mode")?)?;
                null(m.record_completed(
                    f,
                    str_of(field(op, "operation_id")?, "operation_id")?,
                    mode,
                    finality,
                    &results,
                ))
            }
            "reserve" | "bind" => {
                let stage = u64_of(field(op, "stage")?, "stage")?;
                let stage = u32::try_from(stage)
                    .map_err(|_| bad(format!("stage {stage} does not fit in u32")))?;
                let request = str_of(field(op, "request_id")?, "request_id")?;
                if name == "reserve" {
                    null(m.reserve(f, stage, request))
                } else {
                    null(m.bind(f, stage, request))
                }
            }
            "release_fence" => m
                .release_fence(f)
                .map(|ids| json!({"ids": ids_json(&ids)}))
                .map_err(|e| e.kind()),
            "accept_fence" => null(m.accept_fence(f)),
            "begin_close" => null(m.begin_close(f, reason_of(op)?)),
            _ => return Err(bad(format!("unknown op {name:?}"))),
        })
    }
}

/// One line whose outcome differed from its expectation, or could not run.
#[derive(Debug, Clone)]
pub struct Failure {
    /// 1-based line number.
    pub line: usize,
    /// The op name (or `?`).
    pub op: String,
    /// The expected outcome, as JSON text.
    pub expected: String,
    /// The actual outcome, or the parse error.
    pub actual: String,
}

/// Runs one trace's text; returns the failing lines (empty: the trace passed).
pub fn run_trace(text: &str) -> Vec<Failure> {
    let mut runner = Runner::new();
    let mut failures = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fail = |op: &str, expected: String, actual: String| Failure {
            line: i + 1,
            op: op.to_owned(),
            expected,
            actual,
        };
        let op: Map<String, Value> = match serde_json::from_str(line) {
            Ok(Value::Object(map)) => map,
            Ok(other) => {
                failures.push(fail(
                    "?",
                    "a JSON object".into(),
                    format!("cannot parse: {other}"),
                ));
                continue;
            }
            Err(e) => {
                failures.push(fail(
                    "?",
                    "a JSON object".into(),
                    format!("cannot parse: {e}"),
                ));
                continue;
            }
        };
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned();
        let expected = op.get("expect").cloned();
        match runner.run(&op) {
            Err(e) => failures.push(fail(
                &name,
                expected.map_or_else(|| "-".into(), |v| v.to_string()),
                format!("cannot run: {e}"),
            )),
            Ok(None) => {}
            Ok(Some(outcome)) => {
                let actual = match outcome {
                    Ok(v) => json!({ "ok": v }),
                    Err(kind) => json!({ "error": kind.as_str() }),
                };
                match expected {
                    Some(want) if want == actual => {}
                    Some(want) => failures.push(fail(&name, want.to_string(), actual.to_string())),
                    None => {
                        failures.push(fail(&name, "an `expect` field".into(), actual.to_string()));
                    }
                }
            }
        }
    }
    failures
}

/// Expands paths (files, or folders of `*.jsonl`) into sorted trace files.
///
/// # Errors
///
/// An I/O error naming the path that could not be read.
pub fn trace_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries =
                std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect();
            found.sort();
            files.extend(found);
        } else if path.exists() {
            files.push(path.clone());
        } else {
            return Err(format!("{}: no such file or folder", path.display()));
        }
    }
    Ok(files)
}

/// Runs every trace file; returns `(passed, failed)` and writes a report of
/// each failing line to `out`.
///
/// # Errors
///
/// A trace file that cannot be read.
pub fn run_files(
    files: &[PathBuf],
    out: &mut impl std::io::Write,
) -> Result<(usize, usize), String> {
    let (mut passed, mut failed) = (0, 0);
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let failures = run_trace(&text);
        if failures.is_empty() {
            passed += 1;
        } else {
            failed += 1;
            for f in failures {
                let _ = writeln!(
                    out,
                    "{}:{}: op {}\n  expected {}\n  actual   {}",
                    display(file),
                    f.line,
                    f.op,
                    f.expected,
                    f.actual
                );
            }
        }
    }
    Ok((passed, failed))
}

fn display(p: &Path) -> String {
    p.display().to_string()
}
