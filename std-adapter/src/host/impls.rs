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

    #[inline]
    fn open(&mut self, fence: Fence<L>, options: OpenOptions<SC, RC>) -> Result<(), Error<L>> {
        SessionManager::open(self, fence, options)
    }

    #[inline]
    fn open_keyed(
        &mut self,
        fence: Fence<L>,
        options: OpenOptions<SC, RC>,
    ) -> Result<Self::Key, Error<L>> {
        SessionManager::open_keyed(self, fence, options)
    }

    #[inline]
    fn key(&self, session: &Id<L>) -> Option<Self::Key> {
        SessionManager::key(self, session)
    }

    #[inline]
    fn read_at<T>(
        &self,
        key: Self::Key,
        op: impl FnOnce(&AnySession<SC, RC, R, B, D, A, L, K, M>) -> T,
    ) -> Option<T> {
        SessionManager::read_at(self, key, op)
    }

    #[inline]
    fn update_at<T>(
        &mut self,
        key: Self::Key,
        op: impl FnOnce(&mut AnySession<SC, RC, R, B, D, A, L, K, M>) -> Result<T, CoreError>,
    ) -> Option<Result<T, CoreError>> {
        SessionManager::update_at(self, key, op)
    }

    #[inline]
    fn apply_at<T>(
        &mut self,
        key: Self::Key,
        op: impl FnOnce(&mut AnySession<SC, RC, R, B, D, A, L, K, M>, Instant) -> Result<T, CoreError>,
    ) -> Option<Result<T, CoreError>> {
        SessionManager::apply_at(self, key, op)
    }

    #[inline]
    fn remove_closed_at(&mut self, key: Self::Key) -> Option<Result<(), CoreError>> {
        SessionManager::remove_closed_at(self, key)
    }

    #[inline]
    fn close(
        &mut self,
        fence: &Fence<L>,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<L, R>>, Error<L>> {
        SessionManager::close(self, fence, reason)
    }

    #[inline]
    fn close_generation(
        &mut self,
        fence: &Fence<L>,
        generation: u64,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<L, R>>, Error<L>> {
        SessionManager::close_generation(self, fence, generation, reason)
    }

    #[inline]
    fn finalize(&mut self, session: &Id<L>) -> Result<RequestIds<L, R>, Error<L>> {
        SessionManager::finalize(self, session)
    }

    #[inline]
    fn finalize_closed<'a>(
        &mut self,
        sessions: impl IntoIterator<Item = &'a Id<L>>,
    ) -> Vec<Released<L, R>> {
        SessionManager::finalize_closed(self, sessions)
    }

    #[inline]
    fn close_for_requests<I: AsRef<str>>(&mut self, request_ids: &[I]) -> Vec<Released<L, R>> {
        SessionManager::close_for_requests(self, request_ids)
    }

    #[inline]
    fn collect_expired<'a>(
        &mut self,
        excluded: impl IntoIterator<Item = &'a Id<L>>,
    ) -> Vec<Expiry<L, R>> {
        SessionManager::collect_expired(self, excluded)
    }

    #[inline]
    fn next_deadline(&mut self) -> Option<Instant> {
        SessionManager::next_deadline(self)
    }

    #[inline]
    fn export(
        &mut self,
        session: impl AsRef<str>,
    ) -> Result<AnySession<SC, RC, R, B, D, A, L, K, M>, Error<L>> {
        SessionManager::export(self, session)
    }

    #[inline]
    #[allow(clippy::result_large_err)] // as the trait's
    fn import(
        &mut self,
        session: AnySession<SC, RC, R, B, D, A, L, K, M>,
        incarnation: u64,
    ) -> Result<Fence<L>, NotImported<AnySession<SC, RC, R, B, D, A, L, K, M>, L>> {
        SessionManager::import(self, session, incarnation)
    }

    #[inline]
    fn with_open<T>(
        &mut self,
        session: &Id<L>,
        f: impl FnOnce(&mut Session<Open, SC, RC, R, B, D, A, L, K, M>, Instant) -> T,
    ) -> Option<T> {
        SessionManager::with_open(self, session, f)
    }

    #[inline]
    fn with_detached<T>(
        &mut self,
        session: &Id<L>,
        f: impl FnOnce(&mut Session<Detached, SC, RC, R, B, D, A, L, K, M>, Instant) -> T,
    ) -> Option<T> {
        SessionManager::with_detached(self, session, f)
    }

    #[inline]
    fn inspect(&self, session: &Id<L>) -> Option<SessionView<L>> {
        SessionManager::inspect(self, session)
    }

    #[inline]
    fn len(&self) -> usize {
        SessionManager::len(self)
    }

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

    #[inline]
    fn open(&mut self, fence: Fence<L>, options: OpenOptions<SC, RC>) -> Result<(), Error<L>> {
        SharedManager::open(self, fence, options)
    }

    #[inline]
    fn open_keyed(
        &mut self,
        fence: Fence<L>,
        options: OpenOptions<SC, RC>,
    ) -> Result<Self::Key, Error<L>> {
        SharedManager::open_keyed(self, fence, options)
    }

    #[inline]
    fn key(&self, session: &Id<L>) -> Option<Self::Key> {
        SharedManager::key(self, session)
    }

    #[inline]
    fn read_at<T>(
        &self,
        key: Self::Key,
        op: impl FnOnce(&AnySession<SC, RC, R, B, D, A, L, K, M>) -> T,
    ) -> Option<T> {
        SharedManager::read_at(self, key, op)
    }

    #[inline]
    fn update_at<T>(
        &mut self,
        key: Self::Key,
        op: impl FnOnce(&mut AnySession<SC, RC, R, B, D, A, L, K, M>) -> Result<T, CoreError>,
    ) -> Option<Result<T, CoreError>> {
        SharedManager::update_at(self, key, op)
    }

    #[inline]
    fn apply_at<T>(
        &mut self,
        key: Self::Key,
        op: impl FnOnce(&mut AnySession<SC, RC, R, B, D, A, L, K, M>, Instant) -> Result<T, CoreError>,
    ) -> Option<Result<T, CoreError>> {
        SharedManager::apply_at(self, key, op)
    }

    #[inline]
    fn remove_closed_at(&mut self, key: Self::Key) -> Option<Result<(), CoreError>> {
        SharedManager::remove_closed_at(self, key)
    }

    #[inline]
    fn close(
        &mut self,
        fence: &Fence<L>,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<L, R>>, Error<L>> {
        SharedManager::close(self, fence, reason)
    }

    #[inline]
    fn close_generation(
        &mut self,
        fence: &Fence<L>,
        generation: u64,
        reason: CloseReason,
    ) -> Result<Option<RequestIds<L, R>>, Error<L>> {
        SharedManager::close_generation(self, fence, generation, reason)
    }

    #[inline]
    fn finalize(&mut self, session: &Id<L>) -> Result<RequestIds<L, R>, Error<L>> {
        SharedManager::finalize(self, session)
    }

    #[inline]
    fn finalize_closed<'a>(
        &mut self,
        sessions: impl IntoIterator<Item = &'a Id<L>>,
    ) -> Vec<Released<L, R>> {
        SharedManager::finalize_closed(self, sessions)
    }

    #[inline]
    fn close_for_requests<I: AsRef<str>>(&mut self, request_ids: &[I]) -> Vec<Released<L, R>> {
        SharedManager::close_for_requests(self, request_ids)
    }

    #[inline]
    fn collect_expired<'a>(
        &mut self,
        excluded: impl IntoIterator<Item = &'a Id<L>>,
    ) -> Vec<Expiry<L, R>> {
        SharedManager::collect_expired(self, excluded)
    }

    #[inline]
    fn next_deadline(&mut self) -> Option<Instant> {
        SharedManager::next_deadline(self)
    }

    #[inline]
    fn export(
        &mut self,
        session: impl AsRef<str>,
    ) -> Result<AnySession<SC, RC, R, B, D, A, L, K, M>, Error<L>> {
        SharedManager::export(self, session)
    }

    #[inline]
    #[allow(clippy::result_large_err)] // as the trait's
    fn import(
        &mut self,
        session: AnySession<SC, RC, R, B, D, A, L, K, M>,
        incarnation: u64,
    ) -> Result<Fence<L>, NotImported<AnySession<SC, RC, R, B, D, A, L, K, M>, L>> {
        SharedManager::import(self, session, incarnation)
    }

    #[inline]
    fn with_open<T>(
        &mut self,
        session: &Id<L>,
        f: impl FnOnce(&mut Session<Open, SC, RC, R, B, D, A, L, K, M>, Instant) -> T,
    ) -> Option<T> {
        SharedManager::with_open(self, session, f)
    }

    #[inline]
    fn with_detached<T>(
        &mut self,
        session: &Id<L>,
        f: impl FnOnce(&mut Session<Detached, SC, RC, R, B, D, A, L, K, M>, Instant) -> T,
    ) -> Option<T> {
        SharedManager::with_detached(self, session, f)
    }

    #[inline]
    fn inspect(&self, session: &Id<L>) -> Option<SessionView<L>> {
        SharedManager::inspect(self, session)
    }

    #[inline]
    fn len(&self) -> usize {
        SharedManager::len(self)
    }

    #[inline]
    fn session_ids(&self) -> Vec<Id<L>> {
        SharedManager::session_ids(self)
    }
}
