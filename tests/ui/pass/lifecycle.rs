// The positive counterparts: every operation the lifecycle permits compiles in that state,
// refused transitions convert into `Error` with `?`, and `AnySession` holds any state.
use duplex_core::*;

fn main() -> Result<(), Error> {
    let f = Fence::new(Id::new("s")?, 0);
    let (op, req) = (Id::new("op")?, Id::new("req")?);
    let mut open = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    open.touch(&f, Activity::Attach, Instant::ZERO)?;
    open.begin_operation(&f, &op, Instant::ZERO)?;
    let reservation = open.prepare_append(&f, InputMode::TurnCommitOnly)?;
    open.append(&f, InputMode::TurnCommitOnly)?;
    open.reserve_input(&f, 640)?;
    open.reserve_turn(&f)?;
    open.decide_overlap(&f, &overlap::Overlap::speech(300))?;
    let (open, _generation) = open.resume(&f, 0, Instant::ZERO)?; // takeover

    let mut detached: Session<Detached> = open.detach(&f, Instant::ZERO)?;
    detached.touch(&f, Activity::ModelOutput, Instant::ZERO)?;
    detached.end_operation(&f, &op, Instant::ZERO)?;
    let _ = detached.commit_append(&reservation); // stale here, but permitted
    detached.record_completed(&f, &op, InputMode::TurnCommitOnly, Finality::Final, &[1])?;
    detached.completed(&f, &op, InputMode::TurnCommitOnly, Finality::Final)?;
    detached.reserve(&f, 0, &req)?;
    detached.bind(&f, 1, &req)?;
    detached.accept_fence(&f)?;
    let cancelled = detached.cancel(&f, &f.clone().with_epoch(1))?;
    detached.release(&cancelled);
    let drained = detached.drain(&f.clone().with_epoch(1), &f.clone().with_epoch(2), |stage| stage == 1)?;
    detached.release(&drained);
    detached.replace_configs(None, None);
    let _ = (detached.release_input(320), detached.release_turn(), detached.pending_input());
    let _ = (detached.reset_overlap_speech(), detached.overlap_speech_ms(), detached.overlap_config());
    let _ = (detached.deadline(), detached.due(Instant::ZERO));
    let f = f.with_epoch(2);
    let (open, _generation) = detached.resume(&f, 1, Instant::ZERO)?;

    let closing: Session<Closing> = open.begin_close(&f, CloseReason::ClientClose)?;
    let mut closing = closing.begin_close(&f, CloseReason::ExplicitClose)?;
    let _ = closing.stage_request_ids(None).count();
    let _ = closing.resource_request_ids(Some(&f), Some(RequestState::Submitted)).count();
    closing.release(&[req]);
    closing.release_where(|id| id.as_str() == "other");
    let _ = (closing.release_all_input(), closing.cancel_pending_input(), closing.input_limits());
    let _ = (closing.reset_overlap_speech(), closing.overlap_speech_ms());
    let _ = (closing.route_output("req"), closing.draining().count());
    let _drained = closing.release_drained();
    let released = closing.release_fence(&f);
    assert!(released.is_empty());
    let (closed, _released): (Session<Closed>, _) = closing.finalize();
    let _ = (closed.fence(), closed.close_reason(), closed.lease_generation());

    // One variable across every state.
    let mut any = AnySession::from(Session::open(Fence::new(Id::new("t")?, 0), OpenOptions::default(), Instant::ZERO)?);
    let g = any.fence().clone();
    any.append(&g, InputMode::TurnCommitOnly)?;
    any.detach(&g, Instant::ZERO)?;
    any.check_generation(0)?;
    any.begin_close(&g, CloseReason::ClientClose)?;
    let _released = any.finalize()?;
    assert_eq!(any.kind(), StateKind::Closed);
    Ok(())
}
