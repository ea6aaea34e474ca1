//! The FIFO queue of local tasks waiting for one lock.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::LockError;
use crate::kind::Access;
use crate::lock::guard::LockGuard;
use crate::lock::message::GuardReply;
use crate::metrics::LockMetrics;
use crate::options::LockOptions;

pub(crate) struct Waiter {
    /// What the waiter asks for.
    pub(crate) access: Access,
    pub(crate) options: Arc<LockOptions>,
    /// This acquisition's metrics (its handle's label policy).
    pub(crate) metrics: LockMetrics,
    pub(crate) requested_at: Instant,
    pub(crate) reply: GuardReply,
}

/// What the next acquisition is made for: the first waiter's lease terms, its metrics, and
/// how long it has waited (the longest wait here, reported to the store for fairness).
pub(crate) struct NextWaiter {
    pub(crate) access: Access,
    pub(crate) options: Arc<LockOptions>,
    pub(crate) metrics: LockMetrics,
    pub(crate) waited: Duration,
    /// When the waiter asked (its arrival, which `waited` tells the store).
    pub(crate) requested_at: Instant,
}

impl Waiter {
    fn next(&self) -> NextWaiter {
        NextWaiter {
            access: self.access,
            options: self.options.clone(),
            metrics: self.metrics.clone(),
            waited: self.requested_at.elapsed(),
            requested_at: self.requested_at,
        }
    }

    /// Sends this waiter `guard`; a guard it can no longer take is disarmed.
    fn deliver(self, guard: LockGuard) -> bool {
        match self.reply.send(Ok(guard)) {
            Ok(()) => {
                self.metrics.acquire_wait(self.requested_at.elapsed());
                true
            }
            Err(Ok(guard)) => {
                guard.disarm();
                false
            }
            Err(Err(_)) => false,
        }
    }
}

/// Waiters in arrival order, with the waiters and oldest-waiter gauges kept in step (each
/// waiter counted under its own labels), and the one exception to that order: the readers'
/// turn (the default mode's; in arrival order it is never started).
pub(crate) struct Waiters {
    queue: VecDeque<Waiter>,
    /// How many of the readers waiting when this process's writer left still go first
    /// (only those: readers arriving later queue in order, so writers are not shut out).
    readers_first: usize,
    /// This queue's key in the oldest-waiter gauge, and what it last reported there.
    gauge_key: u64,
    reported_oldest: Option<(LockMetrics, Instant)>,
    /// Whether the gauge follows this queue: from when a waiter is seen to wait (refused,
    /// or queued behind another waiter or a hold) until the queue empties. An acquisition
    /// granted at its first attempt never touches the gauge's shared registry.
    published: bool,
}

impl Default for Waiters {
    fn default() -> Self {
        static NEXT_KEY: AtomicU64 = AtomicU64::new(0);
        Self {
            queue: VecDeque::new(),
            readers_first: 0,
            gauge_key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            reported_oldest: None,
            published: false,
        }
    }
}

impl Waiters {
    /// Queues `waiter` behind every waiter that asked no later than it did. A new request
    /// asked last and goes to the back; one asked again with its first arrival (its grant
    /// reached it past the loss deadline, the process paused, and was let go) goes back to
    /// its place, not behind the waiters that asked while it held that grant.
    pub(crate) fn push(&mut self, waiter: Waiter) {
        waiter.metrics.waiters(1.0);
        let place = self
            .queue
            .iter()
            .rposition(|queued| queued.requested_at <= waiter.requested_at)
            .map_or(0, |before| before + 1);
        self.queue.insert(place, waiter);
        self.report_oldest();
    }

    /// How many waiters are queued (some may have left; see [`Waiters::prune`]).
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// The waiters are seen to wait: the oldest-waiter gauge follows them until the queue
    /// empties.
    pub(crate) fn waiting(&mut self) {
        self.published = true;
        self.report_oldest();
    }

    /// Keeps the oldest-waiter gauge on the first waiter in line (the longest-waiting:
    /// the queue is in arrival order), while published.
    fn report_oldest(&mut self) {
        if !self.published {
            return;
        }
        self.published = !self.queue.is_empty();
        let oldest = self
            .queue
            .front()
            .map(|waiter| (waiter.metrics.clone(), waiter.requested_at));
        if oldest == self.reported_oldest {
            return;
        }
        if let Some((metrics, _)) = &self.reported_oldest {
            metrics.oldest_waiter(self.gauge_key, None);
        }
        if let Some((metrics, since)) = &oldest {
            metrics.oldest_waiter(self.gauge_key, Some(*since));
        }
        self.reported_oldest = oldest;
    }

    /// Whether the first waiter in line went away (cancelled or timed out) and is not yet
    /// pruned: the waiter a place in the name's line stands for.
    pub(crate) fn first_left(&self) -> bool {
        self.queue
            .front()
            .is_some_and(|waiter| waiter.reply.is_closed())
    }

    /// Drops waiters whose caller went away (cancelled or timed out); returns whether any
    /// waiter is left.
    pub(crate) fn prune(&mut self) -> bool {
        self.queue.retain(|waiter| {
            let gone = waiter.reply.is_closed();
            if gone {
                waiter.metrics.waiters(-1.0);
            }
            !gone
        });
        self.report_oldest();
        !self.queue.is_empty()
    }

    /// The waiters still listening that ask for `access`.
    fn live_for(&mut self, access: Access) -> impl Iterator<Item = &Waiter> {
        self.prune();
        self.queue
            .iter()
            .filter(move |waiter| waiter.access == access)
    }

    /// The first waiter asking for `access`, if any (after dropping those who left): how a
    /// reader/writer lock lets the readers waiting when a writer leaves go first.
    pub(crate) fn first_live_for(&mut self, access: Access) -> Option<NextWaiter> {
        self.live_for(access).next().map(Waiter::next)
    }

    /// How many waiters still listening ask for `access`.
    pub(crate) fn count_for(&mut self, access: Access) -> usize {
        self.live_for(access).count()
    }

    /// Takes the first waiter asking for `access` out of the line.
    fn take_first_for(&mut self, access: Access) -> Option<Waiter> {
        let at = self
            .queue
            .iter()
            .position(|waiter| waiter.access == access)?;
        self.take_at(at)
    }

    /// Takes the waiter at `at` out of the line.
    fn take_at(&mut self, at: usize) -> Option<Waiter> {
        let waiter = self.queue.remove(at)?;
        waiter.metrics.waiters(-1.0);
        self.report_oldest();
        Some(waiter)
    }

    /// Hands a guard of a lease taken on `terms` to the first waiter asking for `access`
    /// still listening — with `arrived_by`, only to one that asked by then, and only if its
    /// handle asks for the same lease terms (a guard keeps its handle's loss margin; a
    /// waiter on other terms gets a lease of its own). `make_guard`
    /// is called once per waiter tried; a guard that could not be delivered is disarmed (it
    /// never held anything for its caller). Returns whether a waiter took it.
    pub(crate) fn deliver_for(
        &mut self,
        (access, terms): (Access, &LockOptions),
        arrived_by: Option<Instant>,
        mut make_guard: impl FnMut() -> LockGuard,
    ) -> bool {
        loop {
            let Some(first) = self.queue.iter().find(|waiter| waiter.access == access) else {
                return false;
            };
            let later = arrived_by.is_some_and(|by| first.requested_at > by);
            if later || !first.options.same_lease_terms(terms) {
                return false;
            }
            let Some(waiter) = self.take_first_for(access) else {
                return false;
            };
            if waiter.deliver(make_guard()) {
                return true;
            }
        }
    }

    /// Offers a read granted just now to the one reader this process's order allows next
    /// (the order part of `HeldLease::can_join`'s rule): during a readers' turn the next of
    /// the turn's readers, otherwise the first waiter if it reads (a reader queued behind a
    /// writer waits for that writer). `make_guard` is given the reader's options and
    /// arrival and makes its guard, or `None` if the read cannot take it. Returns `None`
    /// when no reader joins, else whether the reader took the guard (a guard it could not
    /// take is disarmed).
    pub(crate) fn deliver_to_joiner(
        &mut self,
        make_guard: impl FnOnce(&LockOptions, Instant) -> Option<LockGuard>,
    ) -> Option<bool> {
        self.prune();
        let at = if self.readers_first > 0 {
            self.queue
                .iter()
                .position(|waiter| waiter.access == Access::Read)?
        } else {
            self.queue
                .front()
                .is_some_and(|waiter| waiter.access == Access::Read)
                .then_some(0)?
        };
        let reader = self.queue.get(at)?;
        let guard = make_guard(&reader.options, reader.requested_at)?;
        let Some(waiter) = self.take_at(at) else {
            guard.disarm();
            return None;
        };
        self.readers_first = self.readers_first.saturating_sub(1);
        Some(waiter.deliver(guard))
    }

    /// Answers the first waiter asking for `access` with `error` (a request the store
    /// refused for good, such as a kind mismatch, fails only those who asked for it).
    pub(crate) fn fail_first_for(&mut self, access: Access, error: LockError) {
        if let Some(waiter) = self.take_first_for(access) {
            let _ = waiter.reply.send(Err(error));
        }
    }

    /// The waiter the next attempt is for: the first in line, or, during a readers' turn,
    /// the first reader.
    pub(crate) fn next_in_turn(&mut self) -> Option<NextWaiter> {
        if self.readers_first > 0 {
            if let Some(reader) = self.first_live_for(Access::Read) {
                self.readers_first -= 1;
                return Some(reader);
            }
            self.readers_first = 0;
        }
        self.next_live()
    }

    /// This process's writer left: the readers waiting now go first.
    pub(crate) fn writer_left(&mut self) {
        self.readers_first = self.count_for(Access::Read);
    }

    /// A writer at the head of the line was refused while readers wait: if no readers'
    /// turn is on, the first reader gets one attempt (returns whether it does). A turn can
    /// be on only if this process's writer left while the refused attempt was out; it keeps
    /// its count.
    pub(crate) fn reader_turn_for_refused_writer(&mut self) -> bool {
        if self.readers_first > 0 || self.count_for(Access::Read) == 0 {
            return false;
        }
        self.readers_first = 1;
        true
    }

    /// A reader's attempt was refused with nobody holding: any readers' turn here is over,
    /// as the store's is (it let its readers in and emptied), so the next attempt is for
    /// the first in line. Returns whether a turn was on.
    pub(crate) fn readers_turn_refused(&mut self) -> bool {
        std::mem::take(&mut self.readers_first) > 0
    }

    /// The first waiter still listening, after dropping those whose caller went away.
    pub(crate) fn next_live(&mut self) -> Option<NextWaiter> {
        self.prune();
        self.queue.front().map(Waiter::next)
    }

    /// Answers every waiter with `error` and empties the queue.
    pub(crate) fn fail_all(&mut self, error: LockError) {
        for waiter in self.queue.drain(..) {
            waiter.metrics.waiters(-1.0);
            let _ = waiter.reply.send(Err(error.clone()));
        }
        self.report_oldest();
    }
}

impl Drop for Waiters {
    fn drop(&mut self) {
        // Keep the gauge right when the actor stops or panics with waiters queued.
        for waiter in &self.queue {
            waiter.metrics.waiters(-1.0);
        }
        self.queue.clear();
        self.report_oldest();
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::oneshot;

    use super::*;
    use crate::lock::engine::held_lease::HeldLease;
    use crate::lock::message::LockMsg;
    use crate::name::LockName;
    use crate::store::LeaseId;

    /// Queues waiters asking for `accesses`, in that order; keep the answers' receivers so
    /// the waiters stay live.
    fn queue_of(
        accesses: &[Access],
    ) -> (
        Waiters,
        Vec<oneshot::Receiver<Result<LockGuard, LockError>>>,
    ) {
        let name = LockName::new("turns").unwrap();
        let options = Arc::new(LockOptions::default());
        let mut waiters = Waiters::default();
        let mut answers = Vec::new();
        for &access in accesses {
            let (reply, answer) = oneshot::channel();
            waiters.push(Waiter {
                access,
                options: options.clone(),
                metrics: LockMetrics::for_access(&name, options.lock_name_label(), access),
                requested_at: Instant::now(),
                reply,
            });
            answers.push(answer);
        }
        (waiters, answers)
    }

    /// Whom the next `n` attempts are for, each taking one turn.
    fn next_turns(waiters: &mut Waiters, n: usize) -> Vec<Access> {
        (0..n)
            .filter_map(|_| waiters.next_in_turn().map(|next| next.access))
            .collect()
    }

    /// With no readers' turn on, a refused writer lets the first reader try once.
    #[test]
    fn a_refused_writer_gives_the_first_reader_one_attempt() {
        let (mut waiters, _answers) = queue_of(&[Access::Write, Access::Read, Access::Read]);
        assert!(waiters.reader_turn_for_refused_writer());
        assert_eq!(
            next_turns(&mut waiters, 2),
            [Access::Read, Access::Write],
            "one reader's attempt, then the writer's again"
        );
    }

    /// A readers' turn already on (this process's writer left while the refused attempt
    /// was out) keeps its count: every reader waiting then still goes before the writer.
    #[test]
    fn a_refused_writer_leaves_a_readers_turn_as_it_is() {
        let (mut waiters, _answers) =
            queue_of(&[Access::Write, Access::Read, Access::Read, Access::Read]);
        waiters.writer_left();
        assert!(!waiters.reader_turn_for_refused_writer());
        assert_eq!(
            next_turns(&mut waiters, 4),
            [Access::Read, Access::Read, Access::Read, Access::Write]
        );
    }

    /// A turn reader refused with nobody holding ends the turn here: the first in line,
    /// the writer, is next, not the turn's other readers (the store would refuse them
    /// too). With no turn on, such a refusal changes nothing.
    #[test]
    fn a_refused_reader_of_the_turn_ends_it() {
        let (mut waiters, _answers) =
            queue_of(&[Access::Write, Access::Read, Access::Read, Access::Read]);
        waiters.writer_left();
        assert_eq!(next_turns(&mut waiters, 1), [Access::Read]);
        assert!(waiters.readers_turn_refused(), "a turn was on");
        assert_eq!(next_turns(&mut waiters, 1), [Access::Write]);
        assert!(!waiters.readers_turn_refused(), "no turn is on any more");
        assert_eq!(next_turns(&mut waiters, 1), [Access::Write]);
    }

    /// A grant that finds its waiter gone goes to the next one under the same lease and
    /// token: the guard the leaver could not take must send nothing as it drops, or its
    /// release would free the place the next waiter now holds. Only the holder's own
    /// guard releases it.
    #[tokio::test]
    async fn a_guard_its_waiter_could_not_take_releases_nothing() {
        let (mut waiters, mut answers) = queue_of(&[Access::Exclusive, Access::Exclusive]);
        let (actor, mut messages) = crate::lock::timer::tests::probe::<LockMsg>().await;
        let name = LockName::new("turns").unwrap();
        let options = Arc::new(LockOptions::default());
        let metrics = LockMetrics::for_access(&name, options.lock_name_label(), Access::Exclusive);
        let hold = HeldLease::new(
            LeaseId::new(),
            (1, 16),
            options.clone(),
            metrics,
            Instant::now(),
        );
        drop(answers.remove(0)); // the first waiter left, still queued
        assert!(
            waiters.deliver_for((Access::Exclusive, &options), None, || hold
                .guard(&name, &actor)),
            "the next waiter takes the grant"
        );
        let holding = answers.remove(0).await.unwrap().unwrap();
        drop(holding);
        actor.send_message(LockMsg::WaiterLeft).unwrap(); // marks the end
        let mut releases = 0;
        while let Some(message) = messages.recv().await {
            match message {
                LockMsg::Release { .. } => releases += 1,
                LockMsg::WaiterLeft => break,
                _ => {}
            }
        }
        assert_eq!(
            releases, 1,
            "a guard nobody took released the holder's place"
        );
    }

    /// With no reader waiting there is no turn to give.
    #[test]
    fn a_refused_writer_with_no_reader_waiting_keeps_the_line() {
        let (mut waiters, _answers) = queue_of(&[Access::Write, Access::Write]);
        assert!(!waiters.reader_turn_for_refused_writer());
        assert_eq!(next_turns(&mut waiters, 1), [Access::Write]);
    }
}
