//! The replay script's lines: space-separated tokens, `~` for the empty
//! string, `-` for an absent value, lists prefixed with their length
//! (`replay/traces.py` writes them).

use duplex_core::{CloseReason, Fence, Finality, Id, InputMode};
use heapless::Vec;

use crate::LIST;

/// A line of the script that does not parse: the firmware reports it, the
/// host counts it as a failure.
#[derive(Debug)]
pub(crate) struct Bad(pub(crate) &'static str);

pub(crate) struct Tokens<'a>(pub(crate) core::str::SplitAsciiWhitespace<'a>);

impl<'a> Tokens<'a> {
    pub(crate) fn next(&mut self) -> Result<&'a str, Bad> {
        self.0.next().ok_or(Bad("missing field"))
    }
    pub(crate) fn text(&mut self) -> Result<&'a str, Bad> {
        Ok(match self.next()? {
            "~" => "",
            t => t,
        })
    }
    pub(crate) fn num(&mut self) -> Result<u64, Bad> {
        self.next()?.parse().map_err(|_| Bad("not a number"))
    }
    pub(crate) fn opt_num(&mut self) -> Result<Option<u64>, Bad> {
        match self.next()? {
            "-" => Ok(None),
            t => t.parse().map(Some).map_err(|_| Bad("not a number")),
        }
    }
    pub(crate) fn flag(&mut self) -> Result<bool, Bad> {
        Ok(self.next()? == "1")
    }
    /// A fence: `None` if its session id can not name a session.
    pub(crate) fn fence(&mut self) -> Result<Option<Fence>, Bad> {
        let session = self.text()?;
        let (incarnation, epoch, turn, response) =
            (self.num()?, self.num()?, self.num()?, self.num()?);
        Ok(Id::new(session).ok().map(|session| Fence {
            session,
            incarnation,
            epoch,
            turn,
            response,
        }))
    }
    /// An optional fence: `None` when absent, `Some(None)` when its id is
    /// invalid.
    pub(crate) fn opt_fence(&mut self) -> Result<Option<Option<Fence>>, Bad> {
        let session = self.text()?;
        if session == "-" {
            return Ok(None);
        }
        let (incarnation, epoch, turn, response) =
            (self.num()?, self.num()?, self.num()?, self.num()?);
        Ok(Some(Id::new(session).ok().map(|session| Fence {
            session,
            incarnation,
            epoch,
            turn,
            response,
        })))
    }
    pub(crate) fn strings(&mut self) -> Result<Vec<&'a str, LIST>, Bad> {
        let count = self.num()?;
        let mut out = Vec::new();
        for _ in 0..count {
            out.push(self.text()?).map_err(|_| Bad("list too long"))?;
        }
        Ok(out)
    }
    pub(crate) fn ints(&mut self) -> Result<Vec<i64, LIST>, Bad> {
        let count = self.num()?;
        let mut out = Vec::new();
        for _ in 0..count {
            let v = self.next()?.parse().map_err(|_| Bad("not an integer"))?;
            out.push(v).map_err(|_| Bad("list too long"))?;
        }
        Ok(out)
    }
    pub(crate) fn mode(&mut self) -> Result<InputMode, Bad> {
        InputMode::parse(self.next()?).ok_or(Bad("unknown mode"))
    }
    pub(crate) fn finality(&mut self) -> Result<Finality, Bad> {
        Ok(Finality::from(self.flag()?))
    }
    pub(crate) fn reason(&mut self) -> Result<CloseReason, Bad> {
        CloseReason::parse(self.next()?).ok_or(Bad("unknown close reason"))
    }
}
