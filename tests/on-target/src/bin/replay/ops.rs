//! Each script operation, in a frame of its own (`#[inline(never)]`): one
//! frame holding every operation's temporaries at once overflowed the
//! micro:bit's 16 KiB.

use core::fmt::Write as _;

use duplex_core::profile::conformance;
use duplex_core::*;
use heapless::Vec;

use crate::json::{appended, fence_json, ids, view};
use crate::script::{Bad, Tokens};
use crate::{Outcome, Runner, HANDLES, LIST, SLOTS};

impl Runner {
    #[inline(never)]
    pub(crate) fn op_profile(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let want = [
                conformance::RESOURCES,
                conformance::BINDINGS,
                conformance::COMPLETED,
                conformance::ACTIVE_OPS,
                conformance::ID_LEN,
                conformance::STAGE_RESULTS,
            ];
            for w in want {
                if usize::try_from(t.num()?).ok() != Some(w) {
                    return Err(Bad(
                        "profile mismatch: the trace needs another capacity profile",
                    ));
                }
            }
            self.null()
        })
    }

    #[inline(never)]
    pub(crate) fn op_manager(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let (max, limit, start) = (t.opt_num()?, t.num()?, t.num()?);
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            if max == Some(0) {
                return Ok(Err(ErrorKind::InvalidConfig));
            }
            // The completed-append limit is checked by the core, as at open.
            let probe = Fence::new(Id::new("probe").map_err(|_| Bad("probe id"))?, 0);
            if let Err(e) = Session::open(
                probe,
                OpenOptions::default().completed_limit(limit),
                Instant::ZERO,
            ) {
                return Ok(Err(e.kind()));
            }
            let extras = crate::ext::Extras::read(t)?;
            self.reset(max, limit, Instant::from_millis(start));
            self.extras = extras;
            self.null()
        })
    }

    #[inline(never)]
    pub(crate) fn op_advance(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            self.clock.advance(Duration::from_millis(t.num()?));
            self.null()
        })
    }

    #[inline(never)]
    pub(crate) fn op_open(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let fence = t.fence()?;
            let modes = match t.next()? {
                "-" => Modes::default(),
                count => {
                    let count: u64 = count.parse().map_err(|_| Bad("mode count"))?;
                    let mut modes: Vec<InputMode, LIST> = Vec::new();
                    for _ in 0..count {
                        modes.push(t.mode()?).map_err(|_| Bad("too many modes"))?;
                    }
                    modes.into_iter().collect()
                }
            };
            let ttl = t.opt_num()?.map(Duration::from_millis);
            let grace = Duration::from_millis(t.num()?);
            let Some(fence) = fence else {
                return Ok(Err(ErrorKind::InvalidId));
            };
            let lease = match LeaseConfig::new(ttl, grace) {
                Ok(l) => l,
                Err(e) => return Ok(Err(e.kind())),
            };
            if self.find(&fence.session).is_some() {
                return Ok(Err(ErrorKind::SessionExists));
            }
            let live = self.slots.iter().flatten().count() as u64;
            if self.max_sessions.is_some_and(|max| live >= max) {
                return Ok(Err(ErrorKind::CapacityExhausted));
            }
            let Some(free) = self.slots.iter().position(Option::is_none) else {
                return Err(Bad("the device's session table is full"));
            };
            let opts = OpenOptions::default()
                .modes(modes)
                .lease(lease)
                .completed_limit(self.completed_limit)
                .input_limits(self.extras.input_limits)
                .overlap(self.extras.overlap);
            match Session::open(fence, opts, self.clock.now()) {
                Ok(s) => {
                    self.slots[free] = Some(AnySession::from(s));
                    self.null()
                }
                Err(e) => Err(e.kind()),
            }
        })
    }

    #[inline(never)]
    pub(crate) fn op_touch(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let activity = Activity::parse(t.next()?).ok_or(Bad("unknown activity"))?;
            let r = self.with(f.as_ref().map(|f| &f.session), |s, now| {
                s.touch(f.as_ref().expect("found"), activity, now)
            });
            r.and_then(|()| self.null())
        })
    }

    #[inline(never)]
    pub(crate) fn op_fence_only(&mut self, t: &mut Tokens<'_>, op: &str) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let id = f.as_ref().map(|f| &f.session);
            match op {
                "detach" => self
                    .with(id, |s, now| s.detach(f.as_ref().expect("found"), now))
                    .and_then(|()| self.null()),
                "accept_fence" => self
                    .with(id, |s, _| s.accept_fence(f.as_ref().expect("found")))
                    .and_then(|()| self.null()),
                _ => {
                    let r = self.with(id, |s, _| s.release_fence(f.as_ref().expect("found")));
                    self.ids_result(r)
                }
            }
        })
    }

    #[inline(never)]
    pub(crate) fn op_resume(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let expected = t.num()?;
            let r = self.with(f.as_ref().map(|f| &f.session), |s, now| {
                s.resume(f.as_ref().expect("found"), expected, now)
            });
            r.and_then(|g| {
                self.ok(|o| {
                    let _ = write!(o, "{{\"generation\":{g}}}");
                })
            })
        })
    }

    #[inline(never)]
    pub(crate) fn op_operation(&mut self, t: &mut Tokens<'_>, op: &str) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let operation = t.text()?;
            let begin = op == "begin_op";
            let r = self.with(f.as_ref().map(|f| &f.session), |s, now| {
                let f = f.as_ref().expect("found");
                let operation = Id::new(operation)?;
                if begin {
                    s.begin_operation(f, &operation, now)
                } else {
                    s.end_operation(f, &operation, now)
                }
            });
            r.and_then(|()| self.null())
        })
    }

    #[inline(never)]
    pub(crate) fn op_append(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let mode = t.mode()?;
            let r = self.with(f.as_ref().map(|f| &f.session), |s, _| {
                s.append(f.as_ref().expect("found"), mode)
            });
            r.and_then(|a| self.ok(|o| appended(o, a)))
        })
    }

    #[inline(never)]
    pub(crate) fn op_prepare_append(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let mode = t.mode()?;
            let handle = usize::try_from(t.num()?)
                .ok()
                .filter(|h| *h < HANDLES)
                .ok_or(Bad("handle"))?;
            let r = self.with(f.as_ref().map(|f| &f.session), |s, _| {
                s.prepare_append(f.as_ref().expect("found"), mode)
            });
            match r {
                Ok(reservation) => {
                    let a = reservation.on_commit();
                    self.handles[handle] = Some(reservation);
                    self.ok(|o| appended(o, a))
                }
                Err(e) => {
                    // A refused prepare keeps nothing under its handle.
                    self.handles[handle] = None;
                    Err(e)
                }
            }
        })
    }

    #[inline(never)]
    pub(crate) fn op_commit_append(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let handle = usize::try_from(t.num()?)
                .ok()
                .filter(|h| *h < HANDLES)
                .ok_or(Bad("handle"))?;
            let r = self.handles[handle].clone().ok_or(Bad("unknown handle"))?;
            let result = self.with(Some(&r.fence().session), |s, _| s.commit_append(&r));
            result.and_then(|a| self.ok(|o| appended(o, a)))
        })
    }

    #[inline(never)]
    pub(crate) fn op_completed(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let (operation, mode, finality) = (t.text()?, t.mode()?, t.finality()?);
            let mut results: Vec<i64, LIST> = Vec::new();
            let r = self.with(f.as_ref().map(|f| &f.session), |s, _| {
                let hit = s.completed(
                    f.as_ref().expect("found"),
                    &Id::new(operation)?,
                    mode,
                    finality,
                )?;
                Ok(hit.map(|r| results.extend_from_slice(r).is_ok()))
            });
            r.and_then(|hit| {
                self.ok(|o| {
                    o.push_str("{\"results\":").ok();
                    if hit.is_some() {
                        o.push('[').ok();
                        for (i, v) in results.iter().enumerate() {
                            let _ = write!(o, "{}{v}", if i > 0 { "," } else { "" });
                        }
                        o.push(']').ok();
                    } else {
                        o.push_str("null").ok();
                    }
                    o.push('}').ok();
                })
            })
        })
    }

    #[inline(never)]
    pub(crate) fn op_record_completed(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let (operation, mode, finality, results) =
                (t.text()?, t.mode()?, t.finality()?, t.ints()?);
            let r = self.with(f.as_ref().map(|f| &f.session), |s, _| {
                s.record_completed(
                    f.as_ref().expect("found"),
                    &Id::new(operation)?,
                    mode,
                    finality,
                    &results,
                )
            });
            r.and_then(|()| self.null())
        })
    }

    #[inline(never)]
    pub(crate) fn op_request(&mut self, t: &mut Tokens<'_>, op: &str) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let stage = u32::try_from(t.num()?).map_err(|_| Bad("stage"))?;
            let request = t.text()?;
            let reserve = op == "reserve";
            let r = self.with(f.as_ref().map(|f| &f.session), |s, _| {
                let f = f.as_ref().expect("found");
                let request = Id::new(request)?;
                if reserve {
                    s.reserve(f, stage, &request)
                } else {
                    s.bind(f, stage, &request)
                }
            });
            r.and_then(|()| self.null())
        })
    }

    #[inline(never)]
    pub(crate) fn op_request_ids(&mut self, t: &mut Tokens<'_>, op: &str) -> Result<Outcome, Bad> {
        Ok({
            let session = Id::new(t.text()?).ok();
            let filter = t.opt_fence()?;
            let state = if op == "resource_ids" {
                match t.next()? {
                    "-" => None,
                    "1" => Some(RequestState::Submitted),
                    _ => Some(RequestState::Reserved),
                }
            } else {
                None
            };
            let stage = op == "stage_ids";
            let r = self.with(session.as_ref(), |s, _| match &filter {
                // A filter fence whose id names no session matches nothing.
                Some(None) => Ok(RequestIds::new()),
                filter => {
                    let filter = filter.as_ref().and_then(Option::as_ref);
                    if stage {
                        s.stage_request_ids(filter)
                    } else {
                        s.resource_request_ids(filter, state)
                    }
                }
            });
            self.ids_result(r)
        })
    }

    #[inline(never)]
    pub(crate) fn op_release(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let session = Id::new(t.text()?).ok();
            let requests = t.strings()?;
            let r = self.with(session.as_ref(), |s, _| {
                s.release_where(|held| requests.iter().any(|r| r.as_bytes() == held.as_bytes()))
            });
            r.and_then(|()| self.null())
        })
    }

    #[inline(never)]
    pub(crate) fn op_cancel(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let (cancelled, next) = (t.fence()?, t.fence()?);
            let Some(cancelled) = cancelled else {
                return Ok(Err(ErrorKind::UnknownSession));
            };
            match next {
                Some(next) => {
                    let r = self.with(Some(&cancelled.session), |s, _| s.cancel(&cancelled, &next));
                    self.ids_result(r)
                }
                // An unnameable next session can never match.
                None => self.with(Some(&cancelled.session), |s, _| {
                    Err(if s.kind() == StateKind::Closing {
                        Error::WrongState {
                            operation: "cancel",
                            state: StateKind::Closing,
                        }
                    } else {
                        Error::FenceMismatch {
                            rule: FenceRule::Identity,
                            expected: s.fence().stamp(),
                            actual: cancelled.stamp(),
                        }
                    })
                }),
            }
        })
    }

    #[inline(never)]
    pub(crate) fn op_replace_configs(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let session = Id::new(t.text()?).ok();
            let (sc, rc) = (t.flag()?, t.flag()?);
            let r = self.with(session.as_ref(), |s, _| {
                s.replace_configs(sc.then_some(()), rc.then_some(()))
            });
            r.and_then(|g| {
                self.ok(|o| {
                    let _ = write!(o, "{{\"config_generation\":{g}}}");
                })
            })
        })
    }

    #[inline(never)]
    pub(crate) fn op_begin_close(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let reason = t.reason()?;
            let r = self.with(f.as_ref().map(|f| &f.session), |s, _| {
                s.begin_close(f.as_ref().expect("found"), reason)
            });
            r.and_then(|()| self.null())
        })
    }

    #[inline(never)]
    pub(crate) fn op_close(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let f = t.fence()?;
            let reason = t.reason()?;
            let slot = f.as_ref().and_then(|f| self.find(&f.session));
            let open = slot
                .and_then(|i| self.slots[i].as_ref())
                .is_some_and(|s| matches!(s.kind(), StateKind::Open | StateKind::Detached));
            match (f, slot) {
                (Some(f), Some(i)) if open => {
                    let mut released = RequestIds::new();
                    let r = self.slots[i]
                        .as_mut()
                        .map_or(Ok(()), |s| s.close_into(&f, reason, &mut released));
                    match r {
                        Ok(()) => {
                            self.slots[i] = None;
                            self.ok(|o| {
                                o.push_str("{\"closed\":true,\"ids\":").ok();
                                ids(o, &released);
                                o.push('}').ok();
                            })
                        }
                        Err(e) => Err(e.kind()),
                    }
                }
                _ => self.ok(|o| {
                    o.push_str("{\"closed\":false,\"ids\":[]}").ok();
                }),
            }
        })
    }

    #[inline(never)]
    pub(crate) fn op_finalize(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let session = Id::new(t.text()?).ok();
            let r = self.with(session.as_ref(), |s, _| s.finalize());
            if r.is_ok() {
                if let Some(i) = session.as_ref().and_then(|id| self.find(id)) {
                    self.slots[i] = None;
                }
            }
            self.ids_result(r)
        })
    }

    #[inline(never)]
    pub(crate) fn op_collect_expired(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let excluded = t.strings()?;
            let now = self.clock.now();
            // Records sorted by session, as the trace writes them.
            let mut order: Vec<usize, SLOTS> =
                (0..SLOTS).filter(|i| self.slots[*i].is_some()).collect();
            order.sort_unstable_by(|a, b| {
                let id = |i: &usize| self.slots[*i].as_ref().map(|s| s.id().as_str());
                id(a).cmp(&id(b))
            });
            self.out.push_str("{\"ok\":{\"expired\":[").ok();
            let mut first = true;
            for i in order {
                let Some(s) = self.slots[i].as_mut() else {
                    continue;
                };
                if excluded.iter().any(|e| *e == s.id().as_str()) {
                    continue;
                }
                let Some(e) = s.expire(now) else { continue };
                let o = &mut self.out;
                if !first {
                    o.push(',').ok();
                }
                first = false;
                let _ = write!(
                    o,
                    "{{\"session\":\"{}\",\"reason\":\"{}\",\"lease_generation\":{},\"fence\":",
                    e.session.as_str(),
                    e.reason.as_str(),
                    e.lease_generation
                );
                fence_json(o, &e.fence);
                o.push_str(",\"submitted\":").ok();
                ids(o, &e.submitted);
                o.push_str(",\"reserved\":").ok();
                ids(o, &e.reserved);
                o.push('}').ok();
            }
            self.out.push_str("]}}").ok();
            Ok(())
        })
    }

    #[inline(never)]
    pub(crate) fn op_close_for_requests(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let requests = t.strings()?;
            self.out.push_str("{\"ok\":{\"closing\":{").ok();
            let mut first = true;
            for slot in &mut self.slots {
                let Some(s) = slot.as_mut() else { continue };
                let Ok(held) = s.resource_request_ids(None, None) else {
                    continue;
                };
                if !held
                    .iter()
                    .any(|own| requests.iter().any(|r| r.as_bytes() == own.as_bytes()))
                {
                    continue;
                }
                if s.kind() != StateKind::Closing {
                    // The session's own fence: accepted by construction.
                    let fence = s.fence().clone();
                    let _ = s.begin_close(&fence, CloseReason::RequestCleanup);
                }
                let o = &mut self.out;
                if !first {
                    o.push(',').ok();
                }
                first = false;
                let _ = write!(o, "\"{}\":", s.id().as_str());
                ids(o, &held);
            }
            self.out.push_str("}}}").ok();
            Ok(())
        })
    }

    #[inline(never)]
    pub(crate) fn op_finalize_closed(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let sessions = t.strings()?;
            let mut done: Vec<Id, LIST> = Vec::new();
            for session in sessions {
                let Some(i) = Id::new(session).ok().and_then(|id| self.find(&id)) else {
                    continue;
                };
                let closing = self.slots[i]
                    .as_ref()
                    .is_some_and(|s| s.kind() == StateKind::Closing);
                if closing && self.slots[i].as_mut().is_some_and(|s| s.finalize().is_ok()) {
                    if let Some(s) = self.slots[i].take() {
                        let _ = done.push(s.id().clone());
                    }
                }
            }
            done.sort_unstable();
            self.ok(|o| {
                o.push_str("{\"finalized\":").ok();
                ids(o, &done);
                o.push('}').ok();
            })
        })
    }

    #[inline(never)]
    pub(crate) fn op_sessions(&mut self) -> Result<Outcome, Bad> {
        Ok({
            let Runner { slots, out, .. } = self;
            let mut all: Vec<&Id, SLOTS> = slots.iter().flatten().map(AnySession::id).collect();
            all.sort_unstable();
            out.push_str("{\"ok\":{\"sessions\":").ok();
            ids(out, all.iter().copied());
            out.push_str("}}").ok();
            Ok(())
        })
    }

    #[inline(never)]
    pub(crate) fn op_inspect(&mut self, t: &mut Tokens<'_>) -> Result<Outcome, Bad> {
        Ok({
            let session = Id::new(t.text()?).ok();
            let slot = session.as_ref().and_then(|id| self.find(id));
            let Runner { slots, out, .. } = self;
            match slot.and_then(|i| slots[i].as_ref()) {
                None => {
                    out.push_str("{\"ok\":{\"absent\":true}}").ok();
                }
                Some(s) => {
                    out.push_str("{\"ok\":").ok();
                    view(out, s);
                    out.push('}').ok();
                }
            }
            Ok(())
        })
    }
}
