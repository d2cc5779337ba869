//! Crossing the boundary: the seed's Python values into the core's, and
//! back. Every conversion that can fail raises the exception a seed user
//! expects, with `.kind`.

use duplex_core::{Activity, Appended, Fence, Id, InputMode, Instant, Modes, Reservation};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};

use crate::classes::{input_append_class, HostClasses};
use crate::errors::{ensure_kind, with_kind};

/// A fence's fields, read from any object with the seed's attributes.
#[derive(Debug, Clone)]
pub(crate) struct FenceArg<'py> {
    pub(crate) object: Bound<'py, PyAny>,
    pub(crate) session_id: Bound<'py, PyString>,
    pub(crate) epoch: u64,
    pub(crate) turn: u64,
    pub(crate) response: u64,
    pub(crate) incarnation: u64,
}

impl<'py> FenceArg<'py> {
    /// Reads `object` as a fence: its five attributes in one call of an
    /// `operator.attrgetter` (one crossing instead of five).
    /// An object without a fence's attributes is refused with `TypeError`
    /// (an argument of the wrong type), not the `AttributeError` of the
    /// first attribute it lacks.
    pub(crate) fn read(object: &Bound<'py, PyAny>) -> PyResult<Self> {
        Self::read_attributes(object).map_err(|e| {
            let py = object.py();
            if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) {
                let type_name = object
                    .get_type()
                    .name()
                    .map_or_else(|_| "?".to_owned(), |n| n.to_string());
                let refused = PyTypeError::new_err(format!(
                    "fence must be a DuplexFence (session_id, epoch, turn_id, response_seq, incarnation), got {type_name}"
                ));
                refused.set_cause(py, Some(e));
                return with_kind(refused, crate::args::INVALID_ARGUMENT);
            }
            ensure_kind(e, crate::args::INVALID_ARGUMENT)
        })
    }

    fn read_attributes(object: &Bound<'py, PyAny>) -> PyResult<Self> {
        let py = object.py();
        let values = [
            object.getattr(intern!(py, "session_id"))?,
            object.getattr(intern!(py, "epoch"))?,
            object.getattr(intern!(py, "turn_id"))?,
            object.getattr(intern!(py, "response_seq"))?,
            object.getattr(intern!(py, "incarnation"))?,
        ];
        let [session_id, epoch, turn, response, incarnation] = values;
        let session_id = session_id.cast_into::<PyString>().map_err(|_| {
            with_kind(
                PyTypeError::new_err("fence session_id must be a str"),
                crate::args::INVALID_ARGUMENT,
            )
        })?;
        let number = |value: Bound<'py, PyAny>, name: &str| -> PyResult<u64> {
            value.extract::<u64>().map_err(|_| {
                with_kind(
                    PyValueError::new_err(format!(
                        "fence {name} must be a non-negative integer below 2**64"
                    )),
                    crate::args::INVALID_ARGUMENT,
                )
            })
        };
        Ok(FenceArg {
            object: object.clone(),
            session_id,
            epoch: number(epoch, "epoch")?,
            turn: number(turn, "turn_id")?,
            response: number(response, "response_seq")?,
            incarnation: number(incarnation, "incarnation")?,
        })
    }

    /// Reads `object`, which must be a `DuplexFence` (the manager's entry
    /// points check the type, as the seed does).
    pub(crate) fn read_exact(
        object: &Bound<'py, PyAny>,
        what: &str,
        classes: &HostClasses,
    ) -> PyResult<Self> {
        Self::check_type(object, what, classes)?;
        Self::read(object)
    }

    /// `TypeError` unless `object` is the host's `DuplexFence`.
    pub(crate) fn check_type(
        object: &Bound<'_, PyAny>,
        what: &str,
        classes: &HostClasses,
    ) -> PyResult<()> {
        let class = classes.fence(object.py());
        if object.is_exact_instance(class) || object.is_instance(class)? {
            return Ok(());
        }
        Err(with_kind(
            PyTypeError::new_err(format!("{what} requires DuplexFence")),
            crate::args::INVALID_ARGUMENT,
        ))
    }

    /// The core's fence with ids of up to `L` bytes.
    pub(crate) fn fence<const L: usize>(&self) -> PyResult<Fence<Id<L>>> {
        let id = id::<L>(self.session_id.to_str()?)?;
        Ok(Fence::new(id, self.incarnation)
            .with_epoch(self.epoch)
            .with_turn(self.turn)
            .with_response(self.response))
    }

    /// Whether the core's `fence` has this fence's values.
    pub(crate) fn is<const L: usize>(&self, fence: &Fence<Id<L>>) -> bool {
        fence.epoch == self.epoch
            && fence.turn == self.turn
            && fence.response == self.response
            && fence.incarnation == self.incarnation
            && self
                .session_id
                .to_str()
                .is_ok_and(|s| s == fence.session.as_str())
    }
}

/// An id of up to `L` bytes, or `ValueError` (`invalid_id`).
pub(crate) fn id<const L: usize>(text: &str) -> PyResult<Id<L>> {
    Id::new(text).map_err(|_| {
        with_kind(
            PyValueError::new_err(format!(
                "duplex id must be 1..={L} bytes, got {} bytes: {text:?}",
                text.len()
            )),
            "invalid_id",
        )
    })
}

/// The host's `DuplexFence` for the core's `fence`.
pub(crate) fn fence_object<'py, const L: usize>(
    py: Python<'py>,
    fence: &Fence<Id<L>>,
    classes: &HostClasses,
) -> PyResult<Bound<'py, PyAny>> {
    FenceValues::of(fence).object(py, classes)
}

/// A fence's values, read from the core under a host's lock and made a
/// `DuplexFence` after it.
#[derive(Debug, Clone)]
pub(crate) struct FenceValues {
    session: String,
    epoch: u64,
    turn: u64,
    response: u64,
    incarnation: u64,
}

impl FenceValues {
    pub(crate) fn of<const L: usize>(fence: &Fence<Id<L>>) -> Self {
        FenceValues {
            session: fence.session.as_str().to_owned(),
            epoch: fence.epoch,
            turn: fence.turn,
            response: fence.response,
            incarnation: fence.incarnation,
        }
    }

    /// The same session and incarnation at another position.
    pub(crate) fn position(&mut self, epoch: u64, turn: u64, response: u64) {
        (self.epoch, self.turn, self.response) = (epoch, turn, response);
    }

    /// `object` if it still has these values (the fence object a session
    /// remembered), otherwise a new `DuplexFence` of the host's class.
    pub(crate) fn current<'py>(
        &self,
        py: Python<'py>,
        object: Option<Py<PyAny>>,
        classes: &HostClasses,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(object) = object {
            let arg = FenceArg::read(object.bind(py))?;
            if arg.session_id.to_str()? == self.session
                && (arg.epoch, arg.turn, arg.response, arg.incarnation)
                    == (self.epoch, self.turn, self.response, self.incarnation)
            {
                return Ok(object.into_bound(py));
            }
        }
        self.object(py, classes)
    }

    /// The host's `DuplexFence` (by keyword for a host's class, whose
    /// field order is its own).
    pub(crate) fn object<'py>(
        &self,
        py: Python<'py>,
        classes: &HostClasses,
    ) -> PyResult<Bound<'py, PyAny>> {
        let class = classes.fence(py);
        if classes.is_own() {
            return class.call1((
                self.session.as_str(),
                self.epoch,
                self.turn,
                self.response,
                self.incarnation,
            ));
        }
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item(intern!(py, "session_id"), self.session.as_str())?;
        kwargs.set_item(intern!(py, "epoch"), self.epoch)?;
        kwargs.set_item(intern!(py, "turn_id"), self.turn)?;
        kwargs.set_item(intern!(py, "response_seq"), self.response)?;
        kwargs.set_item(intern!(py, "incarnation"), self.incarnation)?;
        class.call((), Some(&kwargs))
    }
}

/// The core's value for `object` if it is one of the members (found by
/// identity, a pointer comparison, before anything reads `.value`).
fn member<T: Copy>(object: &Bound<'_, PyAny>, known: &[(Py<PyAny>, T)]) -> Option<T> {
    known.iter().find(|(o, _)| o.is(object)).map(|&(_, v)| v)
}

/// The host's `DuplexInputMode` member of a core mode.
pub(crate) fn mode_object<'py>(
    py: Python<'py>,
    m: InputMode,
    classes: &HostClasses,
) -> PyResult<Bound<'py, PyAny>> {
    match classes.modes().iter().find(|(_, v)| *v == m) {
        Some((o, _)) => Ok(o.bind(py).clone()),
        None => classes.mode(py).call1((m.as_str(),)),
    }
}

/// The core's mode for a `DuplexInputMode` (or its string value).
pub(crate) fn mode(object: &Bound<'_, PyAny>, classes: &HostClasses) -> PyResult<InputMode> {
    if let Some(m) = member(object, classes.modes()) {
        return Ok(m);
    }
    mode_by_value(object)
}

fn mode_by_value(object: &Bound<'_, PyAny>) -> PyResult<InputMode> {
    let value = match object.getattr(intern!(object.py(), "value")) {
        Ok(v) => v,
        Err(_) => object.clone(),
    };
    let name = value
        .cast::<PyString>()
        .map(|s| s.to_str().map(str::to_owned));
    match name {
        Ok(Ok(name)) => InputMode::parse(&name).ok_or_else(|| {
            with_kind(
                PyValueError::new_err(format!("{name:?} is not a valid DuplexInputMode")),
                crate::args::INVALID_ARGUMENT,
            )
        }),
        _ => Err(with_kind(
            PyTypeError::new_err("mode must be DuplexInputMode"),
            crate::args::INVALID_ARGUMENT,
        )),
    }
}

/// The core's modes for a capabilities object (`input_modes`).
pub(crate) fn modes(capabilities: &Bound<'_, PyAny>, classes: &HostClasses) -> PyResult<Modes> {
    read_modes(capabilities, classes).map_err(|e| ensure_kind(e, "invalid_config"))
}

fn read_modes(capabilities: &Bound<'_, PyAny>, classes: &HostClasses) -> PyResult<Modes> {
    let mut out: Option<Modes> = None;
    for m in capabilities
        .getattr(intern!(capabilities.py(), "input_modes"))?
        .try_iter()?
    {
        let m = mode(&m?, classes)?;
        out = Some(out.map_or(Modes::only(m), |o| o.with(m)));
    }
    out.ok_or_else(|| {
        with_kind(
            PyValueError::new_err("capabilities.input_modes must name at least one mode"),
            "invalid_config",
        )
    })
}

/// The core's activity for the host's `DuplexLeaseActivity`.
pub(crate) fn activity(object: &Bound<'_, PyAny>, classes: &HostClasses) -> PyResult<Activity> {
    if let Some(a) = member(object, classes.activities()) {
        return Ok(a);
    }
    let py = object.py();
    let wrong = || {
        with_kind(
            PyTypeError::new_err("lease activity must be DuplexLeaseActivity"),
            crate::args::INVALID_ARGUMENT,
        )
    };
    if !object.is_instance(classes.activity(py))? {
        return Err(wrong());
    }
    let value: String = object
        .getattr(intern!(py, "value"))
        .and_then(|v| v.extract())
        .map_err(|_| wrong())?;
    Activity::ALL
        .iter()
        .copied()
        .find(|a| a.as_str() == value)
        .ok_or_else(wrong)
}

/// Seconds (a float, as the seed's clock returns) to the core's
/// milliseconds: `round(seconds * 1000)`, ties to even as Python rounds.
pub(crate) fn instant(seconds: f64) -> PyResult<Instant> {
    let ms = (seconds * 1000.0).round_ties_even();
    if seconds.is_finite() && seconds >= 0.0 && ms <= 9.0e15 {
        Ok(Instant::from_millis(ms as u64))
    } else {
        Err(with_kind(
            PyValueError::new_err(format!(
                "a clock reading must be finite, non-negative seconds, got {seconds}"
            )),
            crate::args::INVALID_ARGUMENT,
        ))
    }
}

/// Reads a time: the given `now`, or the clock.
pub(crate) fn now(
    py: Python<'_>,
    clock: &crate::shapes::PyClock,
    given: Option<&Bound<'_, PyAny>>,
) -> PyResult<Instant> {
    match given {
        Some(v) if !v.is_none() => reading(v),
        _ => reading(&clock.call(py)?),
    }
}

/// A time in float seconds (a clock's reading, or a `now` argument).
pub(crate) fn reading(value: &Bound<'_, PyAny>) -> PyResult<Instant> {
    use pyo3::types::{PyFloat, PyInt};
    // The common readings first: a float, or a small int (an int read as
    // f64 would go through a float object).
    if let Ok(f) = value.cast_exact::<PyFloat>() {
        return instant(f.value());
    }
    if value.is_exact_instance_of::<PyInt>() {
        // Whole seconds are whole milliseconds: no rounding to do.
        if let Ok(i) = value.extract::<i64>() {
            if (0..=9_000_000_000_000).contains(&i) {
                return Ok(Instant::from_millis(i.unsigned_abs() * 1000));
            }
            return instant(i as f64);
        }
    }
    let seconds: f64 = value.extract().map_err(|_| {
        with_kind(
            PyTypeError::new_err("a clock reading must be a number of seconds"),
            crate::args::INVALID_ARGUMENT,
        )
    })?;
    instant(seconds)
}

/// The core's milliseconds as the seed's float seconds.
pub(crate) fn seconds(at: Instant) -> f64 {
    at.as_millis() as f64 / 1000.0
}

/// An instance of one of the package's own record dataclasses
/// (`DuplexInputAppend`, `DuplexAppendReservation`) with these fields,
/// made as their generated `__init__` makes it, without running it: the
/// object, then each field in the instance `__dict__`, in field order.
/// (A frozen dataclass's `__init__` sets each field through
/// `object.__setattr__`, about 100 ns a field; these classes have no
/// `__post_init__` and no defaults that run code.)
pub(crate) fn record_object<'py>(
    class: &Bound<'py, PyType>,
    fields: &[(&Bound<'py, PyString>, Bound<'py, PyAny>)],
) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::sync::PyOnceLock;
    use pyo3::types::PyDict;
    static OBJECT_NEW: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let py = class.py();
    let new = OBJECT_NEW.get_or_try_init(py, || {
        py.import("builtins")?
            .getattr("object")?
            .getattr("__new__")
            .map(Bound::unbind)
    })?;
    let object = new.bind(py).call1((class,))?;
    let dict = object.getattr(intern!(py, "__dict__"))?;
    let dict = dict.cast::<PyDict>()?;
    for (name, value) in fields {
        dict.set_item(*name, value)?;
    }
    Ok(object)
}

/// A `DuplexInputAppend`.
pub(crate) fn appended_object(py: Python<'_>, a: Appended) -> PyResult<Bound<'_, PyAny>> {
    record_object(
        input_append_class(py)?,
        &[
            (intern!(py, "seq"), a.seq.into_pyobject(py)?.into_any()),
            (
                intern!(py, "turn_seq"),
                a.turn_seq.into_pyobject(py)?.into_any(),
            ),
            (
                intern!(py, "turn_id"),
                a.turn_id.into_pyobject(py)?.into_any(),
            ),
        ],
    )
}

/// A `DuplexAppendReservation` read back.
pub(crate) struct ReservationArg<'py> {
    pub(crate) fence: FenceArg<'py>,
    pub(crate) mode: duplex_core::InputMode,
    pub(crate) base_fence: FenceArg<'py>,
    pub(crate) seq: u64,
    pub(crate) turn_seq: u64,
    pub(crate) key: Option<(u64, u64)>,
    pub(crate) update: Appended,
}

impl<'py> ReservationArg<'py> {
    /// Reads a reservation's attributes (anything missing or of the wrong
    /// type is refused with `.kind = "invalid_argument"`).
    pub(crate) fn read(r: &Bound<'py, PyAny>, classes: &HostClasses) -> PyResult<Self> {
        Self::read_attributes(r, classes).map_err(|e| ensure_kind(e, crate::args::INVALID_ARGUMENT))
    }

    fn read_attributes(r: &Bound<'py, PyAny>, classes: &HostClasses) -> PyResult<Self> {
        let key: Option<(u64, u64, u64)> = r.getattr("base_append_turn_key")?.extract()?;
        let update = r.getattr("update")?;
        Ok(ReservationArg {
            fence: FenceArg::read(&r.getattr("fence")?)?,
            mode: mode(&r.getattr("mode")?, classes)?,
            base_fence: FenceArg::read(&r.getattr("base_fence")?)?,
            seq: r.getattr("base_input_seq")?.extract()?,
            turn_seq: r.getattr("base_input_turn_seq")?.extract()?,
            key: key.map(|(_, turn, response)| (turn, response)),
            update: Appended {
                seq: update.getattr("seq")?.extract()?,
                turn_seq: update.getattr("turn_seq")?.extract()?,
                turn_id: update.getattr("turn_id")?.extract()?,
            },
        })
    }

    pub(crate) fn rebuild<const L: usize>(&self) -> PyResult<Option<Reservation<Id<L>>>> {
        let fence: Fence<Id<L>> = self.fence.fence()?;
        let base: Fence<Id<L>> = self.base_fence.fence()?;
        Ok(Reservation::from_parts(
            fence,
            self.mode,
            base,
            (self.seq, self.turn_seq, self.key),
            self.update,
        ))
    }
}

/// Request ids as Python will list them.
pub(crate) fn names<'a, I: AsRef<str> + ?Sized + 'a>(
    ids: impl IntoIterator<Item = &'a I>,
) -> Vec<String> {
    ids.into_iter().map(|id| id.as_ref().to_owned()).collect()
}
