//! Single flight: identical work running at the same time is done once. The first caller for
//! a key leads (does the work); later callers wait for its result. Used by the result cache
//! (identical read-only calls) and the registry (concurrent lookups of one name), so both
//! follow the same rules:
//!
//! - **Each waiter keeps its own deadline.** A waiter stops waiting at its deadline and is
//!   told so ([`Waited::TimedOut`]); the leader and the other waiters carry on.
//! - **A leader that goes away hands over to exactly one waiter.** A leader dropped without
//!   [`Leader::finish`] (its caller was cancelled or disconnected, or its result belongs to
//!   its caller alone) promotes the longest-waiting live waiter, which becomes the new leader
//!   ([`Waited::Promoted`]); the others keep waiting for it. A cancelled leader therefore
//!   never sends every waiter upstream at once.
//! - **The entry is removed exactly once, by the leader that owns it.** Every leadership has a
//!   generation; finishing or abandoning checks it under the map's lock, so a stale leader can
//!   never remove (or publish into) a newer leader's entry.
//!
//! A lone call (the usual case) costs one map insert and one remove: the result channel is
//! made only when a first waiter arrives, and the map hashes with foldhash rather than SipHash
//! (its keys are the gateway's own: SHA-256s of the arguments and, when present, of the
//! forwarded `_meta` and the caller's subject, see `gateway::call::read_only::result_key`; or a registry
//! name).

use std::{
    collections::{HashMap, VecDeque, hash_map::Entry},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use tokio::sync::{oneshot, watch};

type Slots<T> = HashMap<Arc<str>, Slot<T>, foldhash::fast::RandomState>;

struct Slot<T> {
    /// Which leadership owns the slot now.
    generation: u64,
    /// The result, published once by the leader that finishes; made by the first waiter.
    result: Option<watch::Sender<Option<T>>>,
    /// Waiters in arrival order, each able to take over the lead.
    successors: VecDeque<oneshot::Sender<u64>>,
}

struct Shared<T> {
    slots: Mutex<Slots<T>>,
    generations: AtomicU64,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, Slots<T>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Identical work in flight, by key.
pub struct SingleFlight<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Default for SingleFlight<T> {
    fn default() -> Self {
        Self { shared: Arc::new(Shared { slots: Mutex::default(), generations: AtomicU64::new(1) }) }
    }
}

/// The caller's role for one key.
pub enum Join<T> {
    /// Do the work and [`Leader::finish`] with its result.
    Leader(Leader<T>),
    /// [`Follower::wait`] for the leader's result.
    Follower(Follower<T>),
}

/// What a waiter ends with.
pub enum Waited<T> {
    /// The leader's result.
    Done(T),
    /// The leader went away and this waiter now leads: do the work and finish.
    Promoted(Leader<T>),
    /// The waiter's own deadline passed first; the work goes on without it.
    TimedOut,
}

/// Held by the caller doing the work. Dropped without [`Leader::finish`], it hands the lead
/// over to one waiter (or, with none left, removes its entry).
pub struct Leader<T> {
    shared: Arc<Shared<T>>,
    key: Arc<str>,
    generation: u64,
    done: bool,
}

/// A caller waiting for a leader's result.
pub struct Follower<T> {
    shared: Arc<Shared<T>>,
    key: Arc<str>,
    result: watch::Receiver<Option<T>>,
    promotion: oneshot::Receiver<u64>,
}

impl<T: Clone> SingleFlight<T> {
    /// Leads the work for `key`, or follows the leader already doing it.
    pub fn join(&self, key: &str) -> Join<T> {
        let mut slots = self.shared.lock();
        if let Some(slot) = slots.get_mut(key) {
            // Waiters that gave up leave closed senders behind; drop them here.
            slot.successors.retain(|s| !s.is_closed());
            let (promote, promotion) = oneshot::channel();
            slot.successors.push_back(promote);
            let result = slot.result.get_or_insert_with(|| watch::channel(None).0).subscribe();
            let key = Arc::from(key);
            return Join::Follower(Follower { shared: self.shared.clone(), key, result, promotion });
        }
        let generation = self.shared.generations.fetch_add(1, Ordering::Relaxed);
        let key: Arc<str> = Arc::from(key);
        slots.insert(key.clone(), Slot { generation, result: None, successors: VecDeque::new() });
        Join::Leader(Leader { shared: self.shared.clone(), key, generation, done: false })
    }

    /// Keys with work in flight.
    pub fn len(&self) -> usize {
        self.shared.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Clone> Leader<T> {
    /// Publishes the result to every waiter and removes the entry (if this leadership still
    /// owns it).
    pub fn finish(mut self, result: &T) {
        self.done = true;
        let mut slots = self.shared.lock();
        if let Entry::Occupied(entry) = slots.entry(self.key.clone())
            && entry.get().generation == self.generation
            // Waiters subscribe under this lock, and the slot is gone: with no receiver now,
            // nobody can ever read the result, so it is not copied (the usual lone call).
            && let Some(sender) = entry.remove().result
            && sender.receiver_count() > 0
        {
            sender.send_replace(Some(result.clone()));
        }
    }
}

impl<T> Drop for Leader<T> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut slots = self.shared.lock();
        let Some(slot) = slots.get_mut(&self.key) else { return };
        if slot.generation != self.generation {
            return;
        }
        // Hand over to the first waiter still there; waiters that left are skipped.
        while let Some(successor) = slot.successors.pop_front() {
            let generation = self.shared.generations.fetch_add(1, Ordering::Relaxed);
            if successor.send(generation).is_ok() {
                slot.generation = generation;
                return;
            }
        }
        slots.remove(&self.key);
    }
}

impl<T: Clone> Follower<T> {
    /// Waits for the leader's result, for the lead, or until `deadline` (none: no limit).
    pub async fn wait(mut self, deadline: Option<Instant>) -> Waited<T> {
        let expiry = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(expiry);
        // A receiver of our own, so the arms below may use `self` freely.
        let mut result = self.result.clone();
        tokio::select! {
            biased;
            done = result.wait_for(Option::is_some) => match done {
                Ok(value) => match value.clone() {
                    Some(value) => Waited::Done(value),
                    None => Waited::TimedOut,
                },
                // Unreachable in practice: a slot is only dropped after publishing or with no
                // waiter left. Treat it as a lost leader.
                Err(_) => match self.take_promotion() {
                    Some(leader) => Waited::Promoted(leader),
                    None => Waited::TimedOut,
                },
            },
            promoted = &mut self.promotion => match promoted {
                Ok(generation) => Waited::Promoted(self.leader(generation)),
                Err(_) => Waited::TimedOut,
            },
            _ = &mut expiry => Waited::TimedOut,
        }
    }
}

impl<T> Follower<T> {
    fn leader(&self, generation: u64) -> Leader<T> {
        Leader { shared: self.shared.clone(), key: self.key.clone(), generation, done: false }
    }

    fn take_promotion(&mut self) -> Option<Leader<T>> {
        self.promotion.try_recv().ok().map(|generation| self.leader(generation))
    }
}

impl<T> Drop for Follower<T> {
    fn drop(&mut self) {
        // Promoted but gone before taking the lead (deadline, cancellation): pass it on.
        drop(self.take_promotion());
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use super::*;

    /// Counts its copies.
    #[derive(Debug)]
    struct Counted(Arc<std::sync::atomic::AtomicUsize>);

    impl Clone for Counted {
        fn clone(&self) -> Self {
            self.0.fetch_add(1, Ordering::Relaxed);
            Self(self.0.clone())
        }
    }

    #[tokio::test]
    async fn a_result_is_copied_only_for_waiters() {
        let copies = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let flight: SingleFlight<Counted> = SingleFlight::default();
        let Join::Leader(alone) = flight.join("k") else { panic!("expected to lead") };
        alone.finish(&Counted(copies.clone()));
        assert_eq!(copies.load(Ordering::Relaxed), 0, "nobody waited: nothing to copy");
        let Join::Leader(leader) = flight.join("k") else { panic!("expected to lead") };
        let Join::Follower(follower) = flight.join("k") else { panic!("expected to follow") };
        leader.finish(&Counted(copies.clone()));
        assert!(matches!(follower.wait(None).await, Waited::Done(_)), "the waiter gets the result");
        assert!(copies.load(Ordering::Relaxed) >= 1);
        assert!(flight.is_empty());
    }

    fn leader(join: Join<u32>) -> Leader<u32> {
        match join {
            Join::Leader(leader) => leader,
            Join::Follower(_) => panic!("expected to lead"),
        }
    }

    fn follower(join: Join<u32>) -> Follower<u32> {
        match join {
            Join::Follower(follower) => follower,
            Join::Leader(_) => panic!("expected to follow"),
        }
    }

    /// Lets every task that can run, run (single-threaded test runtime).
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn waiters_get_the_leaders_result_and_the_entry_is_forgotten() {
        let flight = SingleFlight::default();
        let lead = leader(flight.join("k"));
        let a = follower(flight.join("k"));
        let b = follower(flight.join("k"));
        lead.finish(&7);
        assert!(matches!(a.wait(None).await, Waited::Done(7)));
        assert!(matches!(b.wait(None).await, Waited::Done(7)));
        assert!(flight.is_empty(), "finished work is forgotten");
        assert!(matches!(flight.join("k"), Join::Leader(_)));
    }

    #[tokio::test]
    async fn a_waiter_stops_at_its_own_deadline_and_the_others_keep_waiting() {
        let flight = SingleFlight::default();
        let lead = leader(flight.join("k"));
        let hurried = follower(flight.join("k"));
        let patient = follower(flight.join("k"));
        let patient = tokio::spawn(patient.wait(None));
        // Its deadline has passed: it is told at once, while the leader still works.
        assert!(matches!(hurried.wait(Some(Instant::now())).await, Waited::TimedOut));
        settle().await;
        assert!(!patient.is_finished(), "the patient waiter is not released by another's deadline");
        assert_eq!(flight.len(), 1, "the leader's work goes on");
        lead.finish(&5);
        assert!(matches!(patient.await.unwrap(), Waited::Done(5)));
    }

    #[tokio::test]
    async fn a_cancelled_leader_hands_over_to_exactly_one_waiter() {
        let flight = SingleFlight::default();
        let lead = leader(flight.join("k"));
        let (events, mut seen) = mpsc::unbounded_channel();
        for id in 0..3u32 {
            let waiter = follower(flight.join("k"));
            let events = events.clone();
            tokio::spawn(async move {
                match waiter.wait(None).await {
                    Waited::Promoted(leader) => {
                        let _ = events.send((id, "promoted"));
                        // The new leader does the work.
                        leader.finish(&(100 + id));
                    }
                    Waited::Done(value) => {
                        let _ = events.send((value, "done"));
                    }
                    Waited::TimedOut => {
                        let _ = events.send((id, "timed out"));
                    }
                }
            });
        }
        settle().await;
        assert!(seen.try_recv().is_err(), "nobody is released while the leader works");
        drop(lead);
        settle().await;
        let mut outcomes = Vec::new();
        while let Ok(event) = seen.try_recv() {
            outcomes.push(event);
        }
        // The first waiter leads; the other two get its result, not a lead of their own.
        assert_eq!(outcomes, vec![(0, "promoted"), (100, "done"), (100, "done")]);
        assert!(flight.is_empty());
    }

    #[tokio::test]
    async fn a_new_caller_during_a_handover_follows_the_new_leader() {
        let flight = SingleFlight::default();
        let lead = leader(flight.join("k"));
        let first = follower(flight.join("k"));
        drop(lead);
        let late = follower(flight.join("k"));
        let Waited::Promoted(new_leader) = first.wait(None).await else { panic!("first waiter leads") };
        new_leader.finish(&3);
        assert!(matches!(late.wait(None).await, Waited::Done(3)));
    }

    #[tokio::test]
    async fn a_lead_handed_to_a_departed_waiter_passes_on() {
        let flight = SingleFlight::default();
        let lead = leader(flight.join("k"));
        let gone_before = follower(flight.join("k"));
        let gone_after = follower(flight.join("k"));
        let stays = follower(flight.join("k"));
        drop(gone_before);
        // The lead goes to `gone_after`, which leaves without taking it up.
        drop(lead);
        drop(gone_after);
        let Waited::Promoted(new_leader) = stays.wait(None).await else {
            panic!("the remaining waiter leads")
        };
        assert_eq!(flight.len(), 1);
        drop(new_leader);
        assert!(flight.is_empty(), "the last leader with no waiter left removes the entry");
    }

    #[tokio::test]
    async fn a_stale_leader_never_removes_or_answers_a_newer_entry() {
        let flight = SingleFlight::default();
        let old = leader(flight.join("k"));
        let stale = |old: &Leader<u32>| Leader {
            shared: old.shared.clone(),
            key: "k".into(),
            generation: old.generation,
            done: false,
        };
        let (stale_finish, stale_drop) = (stale(&old), stale(&old));
        old.finish(&1);
        let current = leader(flight.join("k"));
        let waiter = follower(flight.join("k"));
        stale_finish.finish(&666);
        drop(stale_drop);
        assert_eq!(flight.len(), 1, "the newer entry is still there");
        assert!(matches!(flight.join("k"), Join::Follower(_)));
        let waiting = tokio::spawn(waiter.wait(None));
        settle().await;
        assert!(!waiting.is_finished(), "a stale leader's result is not published");
        current.finish(&2);
        assert!(matches!(waiting.await.unwrap(), Waited::Done(2)));
        assert!(flight.is_empty());
    }
}
