//! Input budgets, with vllm-omni 0.30's names (`reserve_input_bytes`,
//! `release_input_bytes`, `reserve_pending_turn`, ...): a reservation takes
//! the session's fence and raises `RuntimeError` with `.kind ==
//! "input_backpressure"` past a limit, changing nothing; a release takes
//! no fence and never goes below zero.

use duplex_core::PendingInput;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::args;
use crate::session::PySession;

#[pymethods]
impl PySession {
    /// Reserves `size` bytes of input before an append of that size is
    /// accepted; returns the pending bytes.
    fn reserve_input_bytes(
        &self,
        py: Python<'_>,
        fence: &Bound<'_, PyAny>,
        size: &Bound<'_, PyAny>,
    ) -> PyResult<u32> {
        let size = args::integer::<u64>(size, "size", "0..2**64")?;
        fenced!(self, py, fence, |s, f| s
            .reserve_input(&f, size)
            .map(|p| p.bytes))
    }

    /// Reserves a committed turn before a commit is accepted; returns the
    /// pending turns.
    fn reserve_pending_turn(&self, py: Python<'_>, fence: &Bound<'_, PyAny>) -> PyResult<u16> {
        fenced!(self, py, fence, |s, f| s.reserve_turn(&f).map(|p| p.turns))
    }

    /// Gives back up to `size` reserved bytes; returns the pending bytes.
    fn release_input_bytes(&self, py: Python<'_>, size: &Bound<'_, PyAny>) -> PyResult<u32> {
        let size = args::integer::<u64>(size, "size", "0..2**64")?;
        budget!(self, py, 0, |s| s.release_input(size).map(|p| p.bytes))
    }

    /// Gives back every reserved byte (the turns stay); returns how many
    /// there were.
    fn release_all_input_bytes(&self, py: Python<'_>) -> PyResult<u32> {
        budget!(self, py, 0, |s| s.release_all_input())
    }

    /// Gives back one reserved turn; returns the pending turns.
    fn release_pending_turn(&self, py: Python<'_>) -> PyResult<u16> {
        budget!(self, py, 0, |s| s.release_turn().map(|p| p.turns))
    }

    /// Drops every reservation; returns what was pending, as
    /// `{"bytes": int, "turns": int}`.
    fn cancel_pending_input<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dropped = budget!(self, py, PendingInput::default(), |s| s
            .cancel_pending_input())?;
        let out = PyDict::new(py);
        out.set_item("bytes", dropped.bytes)?;
        out.set_item("turns", dropped.turns)?;
        Ok(out)
    }

    /// The reserved input bytes (0 once closed).
    #[getter]
    fn pending_input_bytes(&self, py: Python<'_>) -> PyResult<u32> {
        budget!(self, py, 0, |s| s.pending_input().map(|p| p.bytes))
    }

    /// The reserved turns (0 once closed).
    #[getter]
    fn pending_input_turns(&self, py: Python<'_>) -> PyResult<u16> {
        budget!(self, py, 0, |s| s.pending_input().map(|p| p.turns))
    }
}
