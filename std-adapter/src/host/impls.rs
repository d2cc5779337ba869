//! [`Host`] for [`SessionManager`] and `&SharedManager`: each method is
//! the manager's inherent one.

use duplex_core::storage::Storage;
use duplex_core::{
    AnySession, Clock, CloseReason, Detached, Error as CoreError, Expiry, Fence, Id, Instant, Open,
    OpenOptions, RequestIds, Session,
};

use super::Host;
use crate::error::Error;
use crate::manager::{NotImported, Released, SessionKey, SessionManager};
use crate::shared::{SharedKey, SharedManager};
use crate::view::SessionView;

/// The methods every manager forwards to its inherent one of the same
/// name: written once, for each manager's type.
macro_rules! forward {
    ($manager:ident) => {
        #[inline]
        fn open(&mut self, fence: Fence<L>, options: OpenOptions<SC, RC>) -> Result<(), Error<L>> {
            $manager::open(self, fence, options)
        }

        #[inline]
        fn open_keyed(
            &mut self,
            fence: Fence<L>,
            options: OpenOptions<SC, RC>,
        ) -> Result<Self::Key, Error<L>> {
            $manager::open_keyed(self, fence, options)
        }

        #[inline]
        fn key(&self, session: &Id<L>) -> Option<Self::Key> {
            $manager::key(self, session)
        }

        #[inline]
        fn read_at<T>(
            &self,
            key: Self::Key,
            op: impl FnOnce(&AnySession<SC, RC, R, B, D, A, L, K, M>) -> T,
        ) -> Option<T> {
            $manager::read_at(self, key, op)
        }

        #[inline]
        fn update_at<T>(
            &mut self,
            key: Self::Key,
            op: impl FnOnce(&mut AnySession<SC, RC, R, B, D, A, L, K, M>) -> Result<T, CoreError>,
        ) -> Option<Result<T, CoreError>> {
            $manager::update_at(self, key, op)
        }

        #[inline]
        fn apply_at<T>(
            &mut self,
            key: Self::Key,
            op: impl FnOnce(
                &mut AnySession<SC, RC, R, B, D, A, L, K, M>,
                Instant,
            ) -> Result<T, CoreError>,
        ) -> Option<Result<T, CoreError>> {
            $manager::apply_at(self, key, op)
        }

        #[inline]
        fn remove_closed_at(&mut self, key: Self::Key) -> Option<Result<(), CoreError>> {
            $manager::remove_closed_at(self, key)
        }

        #[inline]
        fn close(
            &mut self,
            fence: &Fence<L>,
            reason: CloseReason,
        ) -> Result<Option<RequestIds<L, R>>, Error<L>> {
            $manager::close(self, fence, reason)
        }

        #[inline]
        fn close_generation(
            &mut self,
            fence: &Fence<L>,
            generation: u64,
            reason: CloseReason,
        ) -> Result<Option<RequestIds<L, R>>, Error<L>> {
            $manager::close_generation(self, fence, generation, reason)
        }

        #[inline]
        fn finalize(&mut self, session: &Id<L>) -> Result<RequestIds<L, R>, Error<L>> {
            $manager::finalize(self, session)
        }

        #[inline]
        fn finalize_closed<'a>(
            &mut self,
            sessions: impl IntoIterator<Item = &'a Id<L>>,
        ) -> Vec<Released<L, R>> {
            $manager::finalize_closed(self, sessions)
        }

        #[inline]
        fn close_for_requests<I: AsRef<str>>(&mut self, request_ids: &[I]) -> Vec<Released<L, R>> {
            $manager::close_for_requests(self, request_ids)
        }

        #[inline]
        fn collect_expired<'a>(
            &mut self,
            excluded: impl IntoIterator<Item = &'a Id<L>>,
        ) -> Vec<Expiry<L, R>> {
            $manager::collect_expired(self, excluded)
        }

        #[inline]
        fn next_deadline(&mut self) -> Option<Instant> {
            $manager::next_deadline(self)
        }

        #[inline]
        fn export(
            &mut self,
            session: impl AsRef<str>,
        ) -> Result<AnySession<SC, RC, R, B, D, A, L, K, M>, Error<L>> {
            $manager::export(self, session)
        }

        #[inline]
        #[allow(clippy::result_large_err)] // as the trait's
        fn import(
            &mut self,
            session: AnySession<SC, RC, R, B, D, A, L, K, M>,
            incarnation: u64,
        ) -> Result<Fence<L>, NotImported<AnySession<SC, RC, R, B, D, A, L, K, M>, L>> {
            $manager::import(self, session, incarnation)
        }

        #[inline]
        fn with_open<T>(
            &mut self,
            session: &Id<L>,
            f: impl FnOnce(&mut Session<Open, SC, RC, R, B, D, A, L, K, M>, Instant) -> T,
        ) -> Option<T> {
            $manager::with_open(self, session, f)
        }

        #[inline]
        fn with_detached<T>(
            &mut self,
            session: &Id<L>,
            f: impl FnOnce(&mut Session<Detached, SC, RC, R, B, D, A, L, K, M>, Instant) -> T,
        ) -> Option<T> {
            $manager::with_detached(self, session, f)
        }

        #[inline]
        fn inspect(&self, session: &Id<L>) -> Option<SessionView<L>> {
            $manager::inspect(self, session)
        }

        #[inline]
        fn len(&self) -> usize {
            $manager::len(self)
        }
    };
}

impl<
        C: Clock,
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
        M: Storage,
    > Host<SC, RC, R, B, D, A, L, K, M> for SessionManager<C, SC, RC, R, B, D, A, L, K, M>
{
    type Key = SessionKey;
    type Ops<'a>
        = &'a mut Self
    where
        Self: 'a;

    #[inline]
    fn sessions(&mut self) -> Self::Ops<'_> {
        self
    }

    forward!(SessionManager);

    #[inline]
    fn session_ids(&self) -> Vec<Id<L>> {
        SessionManager::session_ids(self).cloned().collect()
    }
}

impl<
        'm,
        C: Clock,
        SC,
        RC,
        const R: usize,
        const B: usize,
        const D: usize,
        const A: usize,
        const L: usize,
        const K: usize,
        M: Storage,
    > Host<SC, RC, R, B, D, A, L, K, M> for &'m SharedManager<C, SC, RC, R, B, D, A, L, K, M>
{
    type Key = SharedKey;
    type Ops<'a>
        = &'m SharedManager<C, SC, RC, R, B, D, A, L, K, M>
    where
        Self: 'a;

    #[inline]
    fn sessions(&mut self) -> Self::Ops<'_> {
        self
    }

    forward!(SharedManager);

    #[inline]
    fn session_ids(&self) -> Vec<Id<L>> {
        SharedManager::session_ids(self)
    }
}
