//! Appends: the two-phase prepare and commit, one-step appends, and the
//! completed-append cache.

use duplex_core::Error as CoreError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PyTuple};

use crate::args;
use crate::classes;
use crate::convert::{self, appended_object, ReservationArg};
use crate::errors::{core_error, gone, Context};
use crate::host::each;
use crate::host::{CoreReservation, ProfileReservation};
use crate::patch::{kwargs, shadowed};
use crate::session::{LastReservation, PySession};

#[pymethods]
impl PySession {
    /// Phase one of an append: a `DuplexAppendReservation`; nothing changes.
    #[pyo3(signature = (*, mode, fence))]
    fn prepare_append<'py>(
        &self,
        py: Python<'py>,
        mode: &Bound<'py, PyAny>,
        fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arg = self.arg(fence)?;
        let m = convert::mode(mode, self.classes())?;
        let cx = Context {
            mode: Some(m.as_str()),
            ..self.cx(py)
        };
        let mut g = self.lock(py);
        let core = g.core()?;
        let made = each!(&*core.managers, |mgr| {
            let f = arg.fence()?;
            mgr.get_at(core.key)
                .ok_or_else(gone)?
                .prepare_append(&f, m)
                .map(|r| {
                    let parts = (r.base_fence().epoch, r.base_input(), r.on_commit());
                    (parts, CoreReservation::wrap(r))
                })
        });
        let ((base_epoch, (seq, turn_seq, key), on_commit), kept) = match made {
            Ok(parts) => parts,
            Err(e) => return Err(self.refuse(py, &mut g, e, Some(fence), cx)),
        };
        // Preparing changes nothing: the base fence is the session's fence,
        // the object the seed would put there.
        let base_fence = self.fence_obj(py, &mut g)?;
        let key = key.map(|(turn, response)| (base_epoch, turn, response));
        drop(g);
        let update = appended_object(py, on_commit)?;
        let reservation = convert::record_object(
            classes::reservation_class(py)?,
            &[
                (intern!(py, "fence"), fence.clone()),
                (intern!(py, "mode"), mode.clone()),
                (intern!(py, "base_fence"), base_fence),
                (
                    intern!(py, "base_input_seq"),
                    seq.into_pyobject(py)?.into_any(),
                ),
                (
                    intern!(py, "base_input_turn_seq"),
                    turn_seq.into_pyobject(py)?.into_any(),
                ),
                (
                    intern!(py, "base_append_turn_key"),
                    key.into_pyobject(py)?.into_any(),
                ),
                (intern!(py, "update"), update.clone()),
            ],
        )?;
        let last = Box::new(LastReservation {
            object: reservation.clone().unbind(),
            update: update.unbind(),
            fence: fence.clone().unbind(),
            on_commit,
            core: kept,
        });
        let mut g = self.lock(py);
        if let Ok(inner) = g.inner() {
            let previous = inner.last_reservation.replace(last);
            drop(g);
            drop(previous);
        }
        Ok(reservation)
    }

    /// Phase two: applies a reservation if the session has not moved.
    fn commit_append<'py>(
        &self,
        py: Python<'py>,
        reservation: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(done) = self.commit_known(py, reservation) {
            return done;
        }
        let parts = ReservationArg::read(reservation, self.classes())?;
        let cx = self.cx(py);
        let mut g = self.lock(py);
        let committed = {
            let (managers, key) = g.core()?.into_parts();
            each!(managers, |m| {
                let r = parts.rebuild();
                m.update_at(key, |s| match &r {
                    Ok(Some(r)) => s.commit_append(r),
                    Ok(None) | Err(_) => Err(stale()),
                })
                .ok_or_else(gone)
            })
        }?;
        match committed {
            Ok(a) => {
                PySession::remember(&mut g, &parts.fence)?;
                drop(g);
                appended_object(py, a)
            }
            Err(e) => Err(core_error(e, cx)),
        }
    }

    /// The recorded stage results of a completed append (copies), or None.
    #[pyo3(signature = (operation_id, *, fence, mode, r#final))]
    fn completed_append<'py>(
        &self,
        py: Python<'py>,
        operation_id: &Bound<'_, PyAny>,
        fence: &Bound<'py, PyAny>,
        mode: &Bound<'py, PyAny>,
        r#final: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let operation_id = args::text(operation_id, "operation_id")?;
        let r#final = args::flag(r#final, "final")?;
        let arg = self.arg(fence)?;
        let m = convert::mode(mode, self.classes())?;
        let cx = Context {
            operation: Some(operation_id),
            ..self.cx(py)
        };
        let mut g = self.lock(py);
        let (core, inner) = g.parts()?;
        let core = core.ok_or_else(gone)?;
        let found = each!(&*core.managers, |mgr| {
            let f = inner.fence(&arg, self.classes())?;
            let op = convert::id(operation_id)?;
            mgr.get_at(core.key)
                .ok_or_else(gone)?
                .completed(&f, &op, m, r#final.into())
                .map(|r| r.and_then(|r| r.first().copied()))
        });
        let handle = match found {
            Ok(h) => h,
            Err(e) => return Err(self.refuse(py, &mut g, e, Some(fence), cx)),
        };
        let Some((handle, record)) =
            handle.and_then(|h| inner.record(h).map(|r| (h, r.clone_ref(py))))
        else {
            return Ok(None);
        };
        drop(g);
        let out = PyList::empty(py);
        for r in crate::session::Record::results(py, handle, record.bind(py))? {
            out.append(r)?;
        }
        Ok(Some(out))
    }

    /// Records a completed append (no fence validation): newest, evicting
    /// the oldest beyond the limit.
    #[pyo3(signature = (operation_id, *, fence, mode, r#final, stage_results))]
    fn record_completed_append(
        &self,
        py: Python<'_>,
        operation_id: &Bound<'_, PyAny>,
        fence: &Bound<'_, PyAny>,
        mode: &Bound<'_, PyAny>,
        r#final: &Bound<'_, PyAny>,
        stage_results: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let operation_id = args::text(operation_id, "operation_id")?;
        let final_is_bool = r#final.is_instance_of::<PyBool>();
        let r#final = args::flag(r#final, "final")?;
        let arg = self.arg(fence)?;
        let m = convert::mode(mode, self.classes())?;
        let mut copies = Vec::new();
        let mut read = || -> PyResult<()> {
            for r in stage_results.try_iter()? {
                copies.push(crate::session::copy_dict(py, &r?)?);
            }
            Ok(())
        };
        read().map_err(|e| crate::errors::ensure_kind(e, args::INVALID_ARGUMENT))?;
        let too_many = self
            .profile
            .stage_results()
            .filter(|max| copies.len() > *max);
        // A compact record if the core keeps all but the one result
        // (`Record`); whether the fence names the session is known under
        // the lock.
        let plain = copies.len() == 1
            && mode.is(&convert::mode_object(py, m, self.classes())?)
            && final_is_bool;
        // Both shapes are made before the lock (no Python allocation, and so
        // no collection and no finalizer, runs under it); the one not kept
        // is dropped after it.
        let mut items = vec![
            fence.clone(),
            mode.clone(),
            PyBool::new(py, r#final).to_owned().into_any(),
        ];
        items.extend(copies.iter().cloned());
        let full = PyTuple::new(py, items)?;
        let compact = match copies.first() {
            Some(one) if plain => Some(crate::session::Record::compact(one)?),
            _ => None,
        };
        let cx = Context {
            operation: Some(operation_id),
            ..self.cx(py)
        };
        let mut g = self.lock(py);
        let (core, inner) = g.parts()?;
        let core = core.ok_or_else(gone)?;
        let counter = inner.next_handle;
        let recorded = {
            let key = core.key;
            each!(&mut *core.managers, |mgr| {
                let f = inner.fence(&arg, self.classes())?;
                let op = convert::id(operation_id)?;
                mgr.update_at(key, |s| {
                    let own = compact.is_some() && f.same_identity(s.fence());
                    let handle = crate::session::Record::handle(counter, own);
                    // The state is checked before the table (SPEC: wrong_state, then
                    // the seed's order, then full): a lookup checks it and changes
                    // nothing.
                    match (too_many, s.completed(&f, &op, m, r#final.into())) {
                        (_, Err(e @ CoreError::WrongState { .. })) => Err(e),
                        (Some(max), _) => Err(CoreError::Full {
                            table: duplex_core::Table::StageResults,
                            capacity: max,
                        }),
                        _ => s
                            .record_completed(&f, &op, m, r#final.into(), &[handle])
                            .map(|()| (handle, own)),
                    }
                })
                .ok_or_else(gone)
            })
        }?;
        let (handle, own) = recorded.map_err(|e| core_error(e, cx))?;
        let record = match &compact {
            Some(items) if own => items.clone(),
            _ => full.clone(),
        };
        inner.next_handle += 1;
        inner.records.push((handle, record.unbind()));
        let pruned = crate::lease::prune_records(&core, inner);
        drop(g);
        drop(pruned);
        Ok(())
    }

    /// Appends input in one step: a `DuplexInputAppend`.
    #[pyo3(signature = (*, mode, fence))]
    fn append_input<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        mode: &Bound<'py, PyAny>,
        fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        if this.is_patched() && shadowed(slf, &["prepare_append", "commit_append"]) {
            let kw = kwargs(py, &[("mode", mode), ("fence", fence)])?;
            let reservation = slf.call_method(intern!(py, "prepare_append"), (), Some(&kw))?;
            return slf.call_method1(intern!(py, "commit_append"), (reservation,));
        }
        this.append_input_native(py, mode, fence)
    }
}

impl PySession {
    /// `append_input` on the core: one step, no reservation object.
    fn append_input_native<'py>(
        &self,
        py: Python<'py>,
        mode: &Bound<'py, PyAny>,
        fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arg = self.arg(fence)?;
        let m = convert::mode(mode, self.classes())?;
        let mut g = self.lock(py);
        let (core, inner) = g.parts()?;
        let core = core.ok_or_else(gone)?;
        let appended = {
            let key = core.key;
            each!(&mut *core.managers, |mgr| {
                let f = inner.fence(&arg, self.classes())?;
                mgr.update_at(key, |s| s.append(&f, m)).ok_or_else(gone)
            })
        }?;
        match appended {
            Ok(a) => {
                if inner.fence_object.as_ref().is_none_or(|o| !o.is(fence)) {
                    PySession::remember_in(Some(&core), inner, &arg);
                }
                drop(g);
                appended_object(py, a)
            }
            Err(e) => {
                let cx = Context {
                    mode: Some(m.as_str()),
                    ..self.cx(py)
                };
                Err(self.refuse(py, &mut g, e, Some(fence), cx))
            }
        }
    }
}

impl PySession {
    /// `commit_append` of the reservation this session made last, its
    /// `update` the same object with the same values: the kept core
    /// reservation is committed (the same check of the session's position
    /// as a reservation read back would get). `None`: another reservation;
    /// the general path reads it.
    fn commit_known<'py>(
        &self,
        py: Python<'py>,
        reservation: &Bound<'py, PyAny>,
    ) -> Option<PyResult<Bound<'py, PyAny>>> {
        use crate::host::{CoreReservation, Managers};
        let update = reservation.getattr(intern!(py, "update")).ok()?;
        let read = |name: &Bound<'py, pyo3::types::PyString>| {
            update.getattr(name).ok()?.extract::<u64>().ok()
        };
        let values = (
            read(intern!(py, "seq"))?,
            read(intern!(py, "turn_seq"))?,
            read(intern!(py, "turn_id"))?,
        );
        let mut g = self.lock(py);
        let result = {
            let (core, inner) = g.parts().ok()?;
            let core = core?;
            let last = inner.last_reservation.as_deref()?;
            let kept = (
                last.on_commit.seq,
                last.on_commit.turn_seq,
                last.on_commit.turn_id,
            );
            if !last.object.is(reservation) || !last.update.is(&update) || kept != values {
                return None;
            }
            let key = core.key;
            let committed = match (core.managers, &last.core) {
                (Managers::Server(m), CoreReservation::Server(r)) => {
                    m.update_at(key, |s| s.commit_append(r))
                }
                (Managers::Conformance(m), CoreReservation::Conformance(r)) => {
                    m.update_at(key, |s| s.commit_append(r))
                }
                _ => return None,
            };
            // Committed: the session's fence is the reservation's.
            if let Some(Ok(_)) = committed {
                inner.fence_object = Some(last.fence.clone_ref(py));
            }
            committed
        };
        drop(g);
        Some(match result {
            Some(Ok(a)) => appended_object(py, a),
            Some(Err(e)) => Err(core_error(e, self.cx(py))),
            None => Err(gone()),
        })
    }
}

fn stale() -> CoreError {
    CoreError::StaleReservation {
        staleness: duplex_core::Staleness::EpochMoved { from: 0, to: 0 },
    }
}
