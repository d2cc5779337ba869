//! The session's operations, with the seed's signatures: each reads its
//! Python arguments and the clock first, then locks the session, runs the
//! core's operation, and answers with the seed's values. One file per
//! part of the session (each its own `#[pymethods]` block).

// The session's locked calls of `input.rs` and `overlap.rs`.

/// Runs `$body` with `$s`, the session's `AnySession`, under the lock; a
/// closed session holds nothing and answers `$closed`.
macro_rules! budget {
    ($self:ident, $py:ident, $closed:expr, |$s:ident| $body:expr) => {{
        let mut g = $self.lock($py);
        match g.parts()?.0 {
            None => Ok($closed),
            Some(core) => {
                let key = core.key;
                crate::host::each!(&mut *core.managers, |m| m.update_at(key, |$s| $body))
                    .ok_or_else(crate::errors::gone)?
                    .map_err(|e| crate::errors::core_error(e, crate::errors::Context::default()))
            }
        }
    }};
}

/// Runs `$body` with `$s`, the session's `AnySession`, and `$f`, the
/// call's fence: the fence read first, refusals mapped as for every call.
macro_rules! fenced {
    ($self:ident, $py:ident, $fence:ident, |$s:ident, $f:ident| $body:expr) => {{
        let arg = $self.arg($fence)?;
        let cx = $self.cx($py);
        $self.op($py, &arg, cx, |core, inner| {
            let key = core.key;
            crate::host::each!(&mut *core.managers, |m| {
                let $f = inner.fence(&arg, $self.classes())?;
                m.update_at(key, |$s| $body).ok_or_else(crate::errors::gone)
            })
        })
    }};
}

mod append;
mod close;
mod drain;
mod input;
mod lease;
mod overlap;
mod requests;
