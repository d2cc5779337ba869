//! The image's optional sections, each a tag byte and, unless the session
//! holds the defaults, its values as one `[u64; 4]` (the cursor's encoding:
//! the same bytes as at their own widths, without another serializer's
//! code). A session at the defaults spends one byte a section: a device
//! saves on every change, and six more bytes a save would cost its flash an
//! eighth of its life.
//!
//! | section | since | values |
//! |---|---|---|
//! | input budget | version 4 | byte limit, turn limit, pending bytes, pending turns |
//! | overlap | version 5 | policy, short-ack ms, barge-in ms, speech heard ms |
//!
//! An older image has neither: its session restores with the defaults and
//! nothing pending or heard.

use super::{In, Out, SnapshotError};
use crate::input::{InputBudget, InputLimits, PendingInput};
use crate::overlap::{OverlapConfig, OverlapPolicy, OverlapState};

/// The section's values, or `None` for the defaults.
fn put(out: &mut Out<'_>, values: Option<[u64; 4]>) -> Result<(), SnapshotError> {
    match values {
        None => out.put(&0_u8),
        Some(values) => {
            out.put(&1_u8)?;
            out.put(&values)
        }
    }
}

/// A section's values, `None` for the defaults: an image older than
/// `since` has none.
fn take(version: u8, since: u8, input: &mut In<'_>) -> Result<Option<[u64; 4]>, SnapshotError> {
    if version < since {
        return Ok(None);
    }
    match input.take::<u8>()? {
        0 => Ok(None),
        1 => input.take().map(Some),
        _ => Err(SnapshotError::Malformed),
    }
}

/// A value narrowed to its field's width.
fn narrow<T: TryFrom<u64>>(value: u64) -> Result<T, SnapshotError> {
    T::try_from(value).map_err(|_| SnapshotError::Malformed)
}

/// Writes the input budget section.
pub(super) fn put_input(out: &mut Out<'_>, budget: &InputBudget) -> Result<(), SnapshotError> {
    let (limits, pending) = (budget.limits(), budget.pending());
    let defaults = limits == InputLimits::DEFAULT && pending == PendingInput::default();
    put(
        out,
        (!defaults).then(|| {
            [
                u64::from(limits.bytes()),
                u64::from(limits.turns()),
                u64::from(pending.bytes),
                u64::from(pending.turns),
            ]
        }),
    )
}

/// Reads the input budget section, checked: nothing pending past its
/// limits.
pub(super) fn take_input(version: u8, input: &mut In<'_>) -> Result<InputBudget, SnapshotError> {
    let Some([bytes_limit, turns_limit, bytes, turns]) = take(version, 4, input)? else {
        return Ok(InputBudget::new(InputLimits::DEFAULT));
    };
    let limits = InputLimits::new(narrow(bytes_limit)?, narrow(turns_limit)?);
    let pending = PendingInput {
        bytes: narrow(bytes)?,
        turns: narrow(turns)?,
    };
    InputBudget::from_parts(limits, pending).ok_or(SnapshotError::Inconsistent(
        "more input pending than the session's limits allow",
    ))
}

/// Writes the overlap section.
pub(super) fn put_overlap(
    out: &mut Out<'_>,
    state: OverlapState,
    policy: OverlapPolicy,
) -> Result<(), SnapshotError> {
    let config = state.config(policy);
    let defaults = config == OverlapConfig::DEFAULT && state.speech_ms == 0;
    let index = OverlapPolicy::ALL.iter().position(|p| *p == policy);
    put(
        out,
        (!defaults).then(|| {
            [
                index.unwrap_or_default() as u64,
                u64::from(config.short_ack_ms),
                u64::from(config.barge_in_ms),
                u64::from(state.speech_ms),
            ]
        }),
    )
}

/// Reads the overlap section, checked: a policy this version knows.
pub(super) fn take_overlap(
    version: u8,
    input: &mut In<'_>,
) -> Result<(OverlapState, OverlapPolicy), SnapshotError> {
    let Some([policy, short_ack_ms, barge_in_ms, speech_ms]) = take(version, 5, input)? else {
        let config = OverlapConfig::DEFAULT;
        return Ok((OverlapState::new(config), config.policy));
    };
    let policy = usize::try_from(policy)
        .ok()
        .and_then(|i| OverlapPolicy::ALL.get(i).copied())
        .ok_or(SnapshotError::Inconsistent("an unknown overlap policy"))?;
    let config = OverlapConfig::new(policy, narrow(short_ack_ms)?, narrow(barge_in_ms)?);
    Ok((OverlapState::heard(config, narrow(speech_ms)?), policy))
}
