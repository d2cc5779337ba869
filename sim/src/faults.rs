//! The faults the simulator injects, and sets of them.

use std::fmt;
use std::str::FromStr;

/// One injectable fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A delivery is retried with the same operation id.
    Duplicate,
    /// An append arrives from a cancelled epoch or a previous incarnation.
    LateAppend,
    /// A barge-in cancel is delivered again, late and out of order.
    ReorderedCancel,
    /// A resume carries a stale lease generation.
    StaleResume,
    /// A resume's answer is lost and the resume is asked again with its
    /// control id: the same generation, and nothing moves.
    ReplayedResume,
    /// A second connection takes the session over; the first one's token
    /// goes stale.
    Takeover,
    /// Clients vanish without closing and must be reaped by idle expiry.
    Vanish,
    /// Bursts of opens above `max_sessions`.
    Burst,
    /// Stage cleanup fails once and is retried before finalize; engine
    /// request failures close their session through `close_for_requests`.
    CleanupFailure,
    /// A client floods its input budgets: a burst of audio past the byte
    /// limit and commits past the turn limit, each refused
    /// (`input_backpressure`) with nothing changed.
    BudgetFlood,
    /// The user speaks over the model's answer: a burst of speech and
    /// silence of random lengths, each chunk decided by the session's
    /// overlap rule as the client predicts, up to a barge-in.
    OverlapBurst,
    /// The speaker's request outlives its turn: the next turn starts, or a
    /// barge-in lets it flush, with it still bound; its late output must
    /// route to its own response (stale after a barge-in), and it is
    /// released once when it stops.
    Drain,
}

impl Fault {
    /// Every fault, in flag order.
    pub const ALL: [Fault; 12] = [
        Fault::Duplicate,
        Fault::LateAppend,
        Fault::ReorderedCancel,
        Fault::StaleResume,
        Fault::ReplayedResume,
        Fault::Takeover,
        Fault::Vanish,
        Fault::Burst,
        Fault::CleanupFailure,
        Fault::BudgetFlood,
        Fault::OverlapBurst,
        Fault::Drain,
    ];

    /// The name used by `--faults`.
    ///
    /// ```
    /// # use duplex_sim::Fault;
    /// assert_eq!(Fault::LateAppend.name(), "late");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Fault::Duplicate => "duplicate",
            Fault::LateAppend => "late",
            Fault::ReorderedCancel => "reorder",
            Fault::StaleResume => "stale-resume",
            Fault::ReplayedResume => "replayed-resume",
            Fault::Takeover => "takeover",
            Fault::Vanish => "vanish",
            Fault::Burst => "burst",
            Fault::CleanupFailure => "cleanup-fail",
            Fault::BudgetFlood => "flood",
            Fault::OverlapBurst => "overlap",
            Fault::Drain => "drain",
        }
    }
}

/// A set of faults.
///
/// ```
/// use duplex_sim::{Fault, Faults};
///
/// let f: Faults = "late,burst".parse()?;
/// assert!(f.has(Fault::Burst) && !f.has(Fault::Vanish));
/// assert_eq!("all".parse::<Faults>()?, Faults::ALL);
/// assert!("sneeze".parse::<Faults>().is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Faults {
    bits: u16,
}

impl Faults {
    /// No fault.
    pub const NONE: Faults = Faults { bits: 0 };
    /// Every fault.
    pub const ALL: Faults = Faults {
        bits: (1 << Fault::ALL.len()) - 1,
    };

    /// Whether `fault` is on.
    ///
    /// See the type-level example.
    pub const fn has(self, fault: Fault) -> bool {
        self.bits & (1 << fault as u16) != 0
    }
}

impl FromStr for Faults {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => return Ok(Faults::NONE),
            "all" => return Ok(Faults::ALL),
            _ => {}
        }
        let mut bits = 0;
        for name in s.split(',').map(str::trim) {
            let fault = Fault::ALL
                .into_iter()
                .find(|f| f.name() == name)
                .ok_or_else(|| {
                    let known: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
                    format!(
                        "unknown fault {name:?}; expected none, all, or a list of: {}",
                        known.join(", ")
                    )
                })?;
            bits |= 1 << fault as u16;
        }
        Ok(Faults { bits })
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Faults::ALL {
            return f.write_str("all");
        }
        if *self == Faults::NONE {
            return f.write_str("none");
        }
        let names: Vec<&str> = Fault::ALL
            .iter()
            .filter(|x| self.has(**x))
            .map(|x| x.name())
            .collect();
        f.write_str(&names.join(","))
    }
}
