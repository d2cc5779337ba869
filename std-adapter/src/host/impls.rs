//! [`Host`] for [`SessionManager`] and `&SharedManager`: each method is
//! the manager's inherent one.

use duplex_core::profile::{IdOf, Profile};
use duplex_core::{
    AnySession, Clock, CloseReason, Detached, Error as CoreError, Expiry, Fence, Instant, Open,
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
        fn open(
            &mut self,
            fence: Fence<IdOf<P>>,
            options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
        ) -> Result<(), Error<IdOf<P>>> {
            $manager::open(self, fence, options)
        }

        #[inline]
        fn open_keyed(
            &mut self,
            fence: Fence<IdOf<P>>,
            options: OpenOptions<P::SessionConfig, P::RuntimeConfig>,
        ) -> Result<Self::Key, Error<IdOf<P>>> {
            $manager::open_keyed(self, fence, options)
        }

        #[inline]
        fn key(&self, session: &IdOf<P>) -> Option<Self::Key> {
            $manager::key(self, session)
        }

        #[inline]
        fn read_at<T>(&self, key: Self::Key, op: impl FnOnce(&AnySession<P>) -> T) -> Option<T> {
            $manager::read_at(self, key, op)
        }

        #[inline]
        fn update_at<T>(
            &mut self,
            key: Self::Key,
            op: impl FnOnce(&mut AnySession<P>) -> Result<T, CoreError>,
        ) -> Option<Result<T, CoreError>> {
            $manager::update_at(self, key, op)
        }

        #[inline]
        fn apply_at<T>(
            &mut self,
            key: Self::Key,
            op: impl FnOnce(&mut AnySession<P>, Instant) -> Result<T, CoreError>,
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
            fence: &Fence<IdOf<P>>,
            reason: CloseReason,
        ) -> Result<Option<RequestIds<P::Tables>>, Error<IdOf<P>>> {
            $manager::close(self, fence, reason)
        }

        #[inline]
        fn close_generation(
            &mut self,
            fence: &Fence<IdOf<P>>,
            generation: u64,
            reason: CloseReason,
        ) -> Result<Option<RequestIds<P::Tables>>, Error<IdOf<P>>> {
            $manager::close_generation(self, fence, generation, reason)
        }

        #[inline]
        fn finalize(&mut self, session: &IdOf<P>) -> Result<RequestIds<P::Tables>, Error<IdOf<P>>> {
            $manager::finalize(self, session)
        }

        #[inline]
        fn finalize_closed<'a>(
            &mut self,
            sessions: impl IntoIterator<Item = &'a IdOf<P>>,
        ) -> Vec<Released<P::Tables>> {
            $manager::finalize_closed(self, sessions)
        }

        #[inline]
        fn close_for_requests<I: AsRef<str>>(
            &mut self,
            request_ids: &[I],
        ) -> Vec<Released<P::Tables>> {
            $manager::close_for_requests(self, request_ids)
        }

        #[inline]
        fn collect_expired<'a>(
            &mut self,
            excluded: impl IntoIterator<Item = &'a IdOf<P>>,
        ) -> Vec<Expiry<P::Tables>> {
            $manager::collect_expired(self, excluded)
        }

        #[inline]
        fn next_deadline(&mut self) -> Option<Instant> {
            $manager::next_deadline(self)
        }

        #[inline]
        fn export(&mut self, session: impl AsRef<str>) -> Result<AnySession<P>, Error<IdOf<P>>> {
            $manager::export(self, session)
        }

        #[inline]
        #[allow(clippy::result_large_err)] // as the trait's
        fn import(
            &mut self,
            session: AnySession<P>,
            incarnation: u64,
        ) -> Result<Fence<IdOf<P>>, NotImported<P>> {
            $manager::import(self, session, incarnation)
        }

        #[inline]
        fn with_open<T>(
            &mut self,
            session: &IdOf<P>,
            f: impl FnOnce(&mut Session<Open, P>, Instant) -> T,
        ) -> Option<T> {
            $manager::with_open(self, session, f)
        }

        #[inline]
        fn with_detached<T>(
            &mut self,
            session: &IdOf<P>,
            f: impl FnOnce(&mut Session<Detached, P>, Instant) -> T,
        ) -> Option<T> {
            $manager::with_detached(self, session, f)
        }

        #[inline]
        fn inspect(&self, session: &IdOf<P>) -> Option<SessionView<IdOf<P>>> {
            $manager::inspect(self, session)
        }

        #[inline]
        fn len(&self) -> usize {
            $manager::len(self)
        }
    };
}

impl<C: Clock, P: Profile> Host<P> for SessionManager<C, P> {
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
    fn session_ids(&self) -> Vec<IdOf<P>> {
        SessionManager::session_ids(self).cloned().collect()
    }
}

impl<'m, C: Clock, P: Profile> Host<P> for &'m SharedManager<C, P> {
    type Key = SharedKey;
    type Ops<'a>
        = &'m SharedManager<C, P>
    where
        Self: 'a;

    #[inline]
    fn sessions(&mut self) -> Self::Ops<'_> {
        self
    }

    forward!(SharedManager);

    #[inline]
    fn session_ids(&self) -> Vec<IdOf<P>> {
        SharedManager::session_ids(self)
    }
}
