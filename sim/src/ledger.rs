//! The request ledger: every request id the simulation reserved or bound,
//! and whether the manager has reported it released (exactly once).

use std::collections::HashMap;

#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Request id -> released.
    ids: HashMap<String, bool>,
}

impl Ledger {
    /// A new request id is held by a session.
    pub(crate) fn hold(&mut self, id: &str) -> Result<(), String> {
        match self.ids.insert(id.to_owned(), false) {
            None => Ok(()),
            Some(_) => Err(format!("{id} reserved twice")),
        }
    }

    pub(crate) fn is_held(&self, id: &str) -> bool {
        self.ids.get(id) == Some(&false)
    }

    /// The manager reported `id` released.
    pub(crate) fn release(&mut self, id: &str) -> Result<(), String> {
        match self.ids.get_mut(id) {
            None => Err(format!("{id} was never reserved")),
            Some(true) => Err(format!("{id} released twice")),
            Some(released) => {
                *released = true;
                Ok(())
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    pub(crate) fn unreleased(&self) -> usize {
        self.ids.values().filter(|released| !**released).count()
    }
}

#[cfg(test)]
mod tests {
    use super::Ledger;

    #[test]
    fn each_id_is_released_exactly_once() {
        let mut ledger = Ledger::default();
        ledger.hold("r1").unwrap();
        ledger.hold("r2").unwrap();
        assert!(ledger.hold("r1").is_err(), "an id is reserved once");
        assert_eq!(ledger.unreleased(), 2);
        ledger.release("r1").unwrap();
        assert!(!ledger.is_held("r1"));
        assert!(ledger.release("r1").unwrap_err().contains("twice"));
        assert!(ledger
            .release("ghost")
            .unwrap_err()
            .contains("never reserved"));
        assert_eq!((ledger.len(), ledger.unreleased()), (2, 1));
    }
}
