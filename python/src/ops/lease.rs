//! The lease's operations: fence acceptance, touch, detach, resume, the
//! lease operations and the opaque configurations.

use duplex_core::{Error as CoreError, StateKind};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::args;
use crate::convert::{self};
use crate::errors::{core_error, generation_mismatch, gone, with_kind, Context};
use crate::host::each;
use crate::session::PySession;

#[pymethods]
impl PySession {
    /// Accepts a newer fence (a new epoch resets the input sequence and
    /// the completed-append cache).
    pub(super) fn accept_fence(&self, py: Python<'_>, fence: &Bound<'_, PyAny>) -> PyResult<()> {
        let arg = self.arg(fence)?;
        let cx = self.cx(py);
        self.op(py, &arg, cx, |core, inner| {
            let key = core.key;
            each!(&mut *core.managers, |m| {
                let f = inner.fence(&arg, self.classes())?;
                m.update_at(key, |s| s.accept_fence(&f)).ok_or_else(gone)
            })
        })
    }

    /// Records activity.
    fn touch(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        activity: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        // The common call: the fence object of the session's last call
        // (one per turn) with an activity member. A refusal of either
        // argument reads the fence first, as the general path does.
        let activity = match convert::activity(activity, self.classes()) {
            Ok(a) => a,
            Err(e) => {
                self.arg(fence)?;
                return Err(e);
            }
        };
        let now = match self.now(py) {
            Ok(now) => now,
            Err(e) => {
                self.arg(fence)?;
                return Err(e);
            }
        };
        if let Some(done) = self.touch_known(py, fence, activity, now) {
            return done;
        }
        let arg = self.arg(fence)?;
        let cx = self.cx(py);
        self.op(py, &arg, cx, |core, inner| {
            let key = core.key;
            each!(&mut *core.managers, |m| {
                let f = inner.fence(&arg, self.classes())?;
                m.at(now)
                    .apply_at(key, |s, t| s.touch(&f, activity, t))
                    .ok_or_else(gone)
            })
        })
    }

    /// The client went away (Open → Detached).
    fn detach(&self, py: Python<'_>, fence: &Bound<'_, PyAny>) -> PyResult<()> {
        let arg = self.arg(fence)?;
        let now = self.now(py)?;
        let cx = self.cx(py);
        self.op(py, &arg, cx, |core, inner| {
            let key = core.key;
            each!(&mut *core.managers, |m| {
                let f = inner.fence(&arg, self.classes())?;
                m.at(now)
                    .apply_at(key, |s, t| s.detach(&f, t))
                    .ok_or_else(gone)
            })
        })
    }

    /// Resume with the lease generation; returns the new generation. With
    /// a `control_id` (vllm-omni 0.30's `resumed_by`), a resume asked again
    /// with the control id of the resume that produced the current
    /// generation gets that generation, and nothing changes.
    #[pyo3(signature = (fence, *, expected_lease_generation, control_id = None))]
    fn resume(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        expected_lease_generation: &Bound<'_, PyAny>,
        control_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let control_id = control_id
            .filter(|c| !c.is_none())
            .map(|c| args::text(c, "control_id"))
            .transpose()?;
        // A value that is not a generation (not an integer in 0..2**64)
        // equals no generation: the seed's comparison refuses it as a
        // mismatch, after the same checks.
        let given = expected_lease_generation.extract::<u64>().ok();
        let arg = self.arg(fence)?;
        let now = self.now(py)?;
        let cx = self.cx(py);
        // For a value that is not a generation, any generation but the
        // current one: the core's checks, in order, end in the mismatch.
        self.op(py, &arg, cx, |core, inner| {
            let result = {
                let key = core.key;
                each!(&mut *core.managers, |m| {
                    let f = inner.fence(&arg, self.classes())?;
                    let control = control_id.map(convert::id).transpose()?;
                    m.at(now)
                        .apply_at(key, |s, t| {
                            let other = s.lease_generation().wrapping_add(1);
                            let expected = given.unwrap_or(other);
                            match &control {
                                Some(c) => s.resume_idempotent(&f, expected, c, t),
                                None => s.resume(&f, expected, t),
                            }
                        })
                        .ok_or_else(gone)
                })
            }?;
            match (given, result) {
                (None, Err(CoreError::GenerationMismatch { expected, .. })) => {
                    Err(generation_mismatch(expected, expected_lease_generation))
                }
                (_, result) => Ok(result),
            }
        })
    }

    /// Starts a lease operation.
    fn begin_operation(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        operation_id: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.lease_operation(py, fence, operation_id, true)
    }

    /// Ends a lease operation.
    fn end_operation(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        operation_id: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.lease_operation(py, fence, operation_id, false)
    }

    /// Replaces the session configuration (a new generation).
    fn replace_session_config(
        &self,
        py: Python<'_>,
        session_config: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.replace_configs(py, Some(session_config), None)
    }

    /// Replaces the runtime configuration (a new generation).
    fn replace_runtime_config(
        &self,
        py: Python<'_>,
        runtime_config: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.replace_configs(py, None, Some(runtime_config))
    }

    /// Publishes one configuration generation atomically.
    #[pyo3(signature = (*, session_config = None, runtime_config = None))]
    fn replace_configs(
        &self,
        py: Python<'_>,
        session_config: Option<&Bound<'_, PyAny>>,
        runtime_config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let session_config = session_config
            .filter(|c| !c.is_none())
            .map(|c| crate::session::copy_dict(py, c))
            .transpose()?;
        let runtime_config = runtime_config
            .filter(|c| !c.is_none())
            .map(|c| crate::session::copy_dict(py, c))
            .transpose()?;
        let cx = self.cx(py);
        let given = (session_config.is_some(), runtime_config.is_some());
        let mut g = self.lock(py);
        // The core's rule: the state first (a closing session refuses even
        // an empty call), then nothing given changes nothing.
        let published = match g.parts()?.0 {
            Some(core) => {
                let key = core.key;
                each!(&mut *core.managers, |m| {
                    m.update_at(key, |s| {
                        s.replace_configs(given.0.then_some(()), given.1.then_some(()))
                    })
                    .ok_or_else(gone)
                })
            }?,
            None => Err(CoreError::WrongState {
                operation: "replace_configs",
                state: StateKind::Closed,
            }),
        };
        published.map_err(|e| core_error(e, cx))?;
        let inner = g.inner()?;
        if let Some(c) = session_config {
            inner.session_config = Some(c.unbind());
        }
        if let Some(c) = runtime_config {
            inner.runtime_config = Some(c.unbind());
        }
        Ok(())
    }
}

/// Refuses an empty lease operation id as the seed does.
fn lease_op_id(operation_id: &str) -> PyResult<()> {
    if operation_id.is_empty() {
        return Err(with_kind(
            PyValueError::new_err("duplex lease operation_id must not be empty"),
            "invalid_id",
        ));
    }
    Ok(())
}

impl PySession {
    /// Starts (`begin`) or ends a lease operation. Only a start refuses an
    /// empty id before the fence is read (the seed's order); an end finds
    /// no such operation.
    fn lease_operation(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        operation_id: &Bound<'_, PyAny>,
        begin: bool,
    ) -> PyResult<()> {
        let operation_id = args::text(operation_id, "operation_id")?;
        let arg = self.arg(fence)?;
        if begin {
            lease_op_id(operation_id)?;
        }
        let now = self.now(py)?;
        let cx = Context {
            operation: Some(operation_id),
            ..self.cx(py)
        };
        self.op(py, &arg, cx, |core, inner| {
            let key = core.key;
            each!(&mut *core.managers, |m| {
                let f = inner.fence(&arg, self.classes())?;
                let op = convert::id(operation_id)?;
                m.at(now)
                    .apply_at(key, |s, t| {
                        if begin {
                            s.begin_operation(&f, &op, t)
                        } else {
                            s.end_operation(&f, &op, t)
                        }
                    })
                    .ok_or_else(gone)
            })
        })
    }

    /// `touch` with a fence the session knows by identity: the object its
    /// last calls gave, already converted, and the session's current fence
    /// (so nothing is remembered anew). One lock, no attribute read.
    /// `None`: not such a fence; the general path takes it.
    #[inline]
    fn touch_known(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        activity: duplex_core::Activity,
        now: duplex_core::Instant,
    ) -> Option<PyResult<()>> {
        use crate::host::{CoreFence, Managers};
        let mut g = self.lock(py);
        let result = {
            let (core, inner) = g.parts().ok()?;
            let core = core?;
            if !inner.fence_object.as_ref().is_some_and(|o| o.is(fence)) {
                return None;
            }
            let (object, converted) = inner.arg_fence.as_deref()?;
            if !object.is(fence) {
                return None;
            }
            let key = core.key;
            match (core.managers, converted) {
                (Managers::Server(m), CoreFence::Server(f)) => {
                    m.at(now).apply_at(key, |s, t| s.touch(f, activity, t))
                }
                (Managers::Conformance(m), CoreFence::Conformance(f)) => {
                    m.at(now).apply_at(key, |s, t| s.touch(f, activity, t))
                }
                _ => return None,
            }
        };
        Some(match result {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(self.refuse(py, &mut g, e, Some(fence), self.cx(py))),
            None => Err(gone()),
        })
    }
}
