// The positive counterparts: every operation SPEC §5 permits compiles in that state.
use duplex_core::*;

fn main() -> Result<(), Error> {
    let f = Fence::new(Id::new("s")?, 0);
    let (op, req) = (Id::new("op")?, Id::new("req")?);
    let mut open: Session<Open> = Session::open(f.clone(), OpenOptions::default(), Instant::ZERO)?;
    open.touch(&f, Activity::Attach, Instant::ZERO)?;
    open.begin_operation(&f, &op, Instant::ZERO)?;
    let reservation = open.prepare_append(InputMode::TurnCommitOnly, &f)?;
    open.append(InputMode::TurnCommitOnly, &f)?;
    open.resume(&f, 0, Instant::ZERO)?; // takeover

    let mut detached: Session<Detached> = open.detach(&f, Instant::ZERO).map_err(Rejected::into_error)?;
    detached.touch(&f, Activity::ModelOutput, Instant::ZERO)?;
    detached.end_operation(&f, &op, Instant::ZERO)?;
    let _ = detached.commit_append(&reservation); // stale here, but permitted
    detached.record_completed(&op, &f, InputMode::TurnCommitOnly, true, &[1])?;
    detached.completed(&op, &f, InputMode::TurnCommitOnly, true)?;
    detached.reserve(0, &req, &f)?;
    detached.bind(1, &req, &f)?;
    detached.accept_fence(&f)?;
    detached.cancel(&f, &f.clone().with_epoch(1))?;
    detached.replace_configs(None, None);
    let f = f.with_epoch(1);
    let (open, _generation) = detached.resume(&f, 1, Instant::ZERO).map_err(Rejected::into_error)?;

    let mut closing: Session<Closing> = open.begin_close(&f, CloseReason::ClientClose).map_err(Rejected::into_error)?;
    closing.begin_close(&f, CloseReason::ExplicitClose)?;
    let _ = closing.stage_request_ids(None).count();
    let _ = closing.resource_request_ids(Some(&f), Some(true)).count();
    closing.release(&["req"]);
    closing.release_fence(&f);
    let (closed, _released): (Session<Closed>, _) = closing.finalize();
    let _ = (closed.fence(), closed.close_reason(), closed.lease_generation());
    Ok(())
}
