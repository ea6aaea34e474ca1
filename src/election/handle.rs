//! [`Election`]: the election face of the campaign engine.

use std::future::Future;

use ractor::{ActorCell, ActorRef, Message, SpawnErr};
use tokio::sync::broadcast;

use super::event::{ElectionEvent, LeaderInfo};
use super::options::ElectionOptions;
use super::{leader_gauge, observer};
use crate::campaign::Campaign;
use crate::error::LockError;
use crate::lock::Lock;
use crate::name::LockName;

/// One candidate in a leader election: at most one candidate across all managers sharing
/// the store leads at a time, and a deposed leader is told before another can lead.
///
/// Create it with [`LockManager::election`](crate::LockManager::election). Clones share the
/// candidate; dropping the last clone resigns.
///
/// ```
/// use mongolock::{ElectionEvent, ElectionOptions, LockManager, LockOptions, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
/// let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
/// let election = manager.election("scheduler", ElectionOptions::default())?;
/// let mut events = election.subscribe();
/// let token = election.campaign().await?;          // resolves once elected
/// loop {                                            // LeaderChanged events come too
///     if let Ok(ElectionEvent::Elected { token: elected }) = events.recv().await {
///         assert_eq!(elected, token);
///         break;
///     }
/// }
/// let leader = election.leader().await?.expect("someone leads");
/// assert_eq!(&leader.holder, manager.holder_id());
/// election.resign().await?;                         // hand over promptly
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Election {
    campaign: Campaign<ElectionEvent>,
}

impl Election {
    pub(crate) fn new(lock: Lock, options: &ElectionOptions) -> Result<Self, LockError> {
        let every = options.retry_period();
        let campaign = Campaign::spawn(lock.clone(), every)?;
        campaign.add_sink(leader_gauge::sink(lock.name()))?;
        observer::spawn(lock, campaign.publisher(), campaign.subscribe(), every);
        Ok(Self { campaign })
    }

    /// The election's name (the lock it runs on).
    ///
    /// ```
    /// # use mongolock::{ElectionOptions, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let election = manager.election("scheduler", ElectionOptions::default())?;
    /// assert_eq!(election.name().as_str(), "scheduler");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &LockName {
        self.campaign.lock().name()
    }

    /// Joins the election and waits until this candidate leads; returns the term's fencing
    /// token. Campaigning continues in the background after a deposition, until
    /// [`resign`](Self::resign) or shutdown.
    ///
    /// # Errors
    ///
    /// [`LockError::CampaignStopped`] if [`resign`](Self::resign) is called first,
    /// [`LockError::Shutdown`] if the manager shuts down.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future leaves the candidate campaigning; it still
    /// leads once elected (call [`resign`](Self::resign) to stop).
    ///
    /// ```
    /// # use mongolock::{ElectionOptions, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let election = manager.election("scheduler", ElectionOptions::default())?;
    /// let token = election.campaign().await?;
    /// # Ok(()) }
    /// ```
    pub async fn campaign(&self) -> Result<u64, LockError> {
        self.campaign.wait_acquired().await
    }

    /// Joins the election without waiting; follow it through [`subscribe`](Self::subscribe).
    ///
    /// # Errors
    ///
    /// [`LockError::Shutdown`] if the election has stopped.
    ///
    /// ```
    /// # use mongolock::{ElectionOptions, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let election = manager.election("scheduler", ElectionOptions::default())?;
    /// election.campaign_in_background()?;
    /// # Ok(()) }
    /// ```
    pub fn campaign_in_background(&self) -> Result<(), LockError> {
        self.campaign.start()
    }

    /// Steps down if leading (releasing the lease at once, so another candidate can take
    /// over on its next retry) and stops campaigning. [`campaign`](Self::campaign) rejoins.
    ///
    /// # Errors
    ///
    /// What releasing the lock returned: [`LockError::Lost`] if the term had already been
    /// lost.
    ///
    /// # Cancel safety
    ///
    /// Resigning is sent before the first await: dropping the future still steps down;
    /// only the release's answer is lost.
    ///
    /// ```
    /// # use mongolock::{ElectionOptions, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let election = manager.election("scheduler", ElectionOptions::default())?;
    /// election.campaign().await?;
    /// election.resign().await?;
    /// assert!(election.leader().await?.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn resign(&self) -> Result<(), LockError> {
        self.campaign.stop().await
    }

    /// Who leads now according to the store, for any candidate or mere observer.
    ///
    /// # Errors
    ///
    /// [`LockError::Store`] if the store cannot be read.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```
    /// # use mongolock::{ElectionOptions, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let election = manager.election("scheduler", ElectionOptions::default())?;
    /// assert!(election.leader().await?.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self) -> Result<Option<LeaderInfo>, LockError> {
        Ok(self
            .campaign
            .lock()
            .inspect()
            .await?
            .as_ref()
            .and_then(LeaderInfo::from_record))
    }

    /// Events from now on: this candidate's terms and, observed every retry period, leader
    /// changes. A receiver more than 64 events behind skips ahead instead of slowing
    /// anything down.
    ///
    /// ```
    /// # use mongolock::{ElectionOptions, LockManager, LockOptions, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let election = manager.election("scheduler", ElectionOptions::default())?;
    /// let mut events = election.subscribe();
    /// election.campaign_in_background()?;
    /// println!("{:?}", events.recv().await);
    /// # Ok(()) }
    /// ```
    pub fn subscribe(&self) -> broadcast::Receiver<ElectionEvent> {
        self.campaign.subscribe()
    }

    /// Delivers every event to `actor` as `to_message(event)`. Sends never wait, so a slow
    /// actor delays nothing; a mapping that panics is removed and logged.
    ///
    /// # Errors
    ///
    /// [`LockError::Shutdown`] if the election has stopped.
    ///
    /// ```
    /// # use mongolock::{ElectionEvent, ElectionOptions, LockManager, LockOptions, MemoryStore};
    /// # use ractor::{Actor, ActorProcessingErr, ActorRef};
    /// # struct Dashboard;
    /// # impl Actor for Dashboard {
    /// #     type Msg = ElectionEvent; type State = (); type Arguments = ();
    /// #     async fn pre_start(&self, _: ActorRef<ElectionEvent>, _: ()) -> Result<(), ActorProcessingErr> { Ok(()) }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let (dashboard, _) = Actor::spawn(None, Dashboard, ()).await?;
    /// let election = manager.election("scheduler", ElectionOptions::default())?;
    /// election.subscribe_actor(&dashboard, |event| event)?;
    /// # Ok(()) }
    /// ```
    pub fn subscribe_actor<M: Message>(
        &self,
        actor: &ActorRef<M>,
        to_message: impl Fn(ElectionEvent) -> M + Send + 'static,
    ) -> Result<(), LockError> {
        self.campaign.subscribe_actor(actor, to_message)
    }

    /// Runs a user actor only while this candidate leads (client-go's `OnStartedLeading`,
    /// Curator's `LeaderSelector`): `spawn(token, supervisor)` is called at the start of
    /// every term and must spawn the actor linked to `supervisor`; it is stopped when the
    /// term ends. If the actor stops on its own, this candidate steps down and campaigns
    /// again. Joins the election at once.
    ///
    /// # Errors
    ///
    /// [`LockError::Shutdown`] if the election has stopped.
    ///
    /// ```
    /// # use mongolock::{ElectionOptions, LockManager, LockOptions, MemoryStore};
    /// use ractor::{Actor, ActorProcessingErr, ActorRef};
    ///
    /// struct Scheduler;
    /// impl Actor for Scheduler {
    ///     type Msg = ();
    ///     type State = ();
    ///     type Arguments = u64;
    ///     async fn pre_start(&self, _: ActorRef<()>, token: u64) -> Result<(), ActorProcessingErr> {
    ///         println!("leading term {token}");
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mongolock::LockError> {
    /// # let manager = LockManager::start(MemoryStore::new(), LockOptions::default()).await?;
    /// let election = manager.election("scheduler", ElectionOptions::default())?;
    /// election.run_while_leader(|token, supervisor| async move {
    ///     let (actor, _) = Actor::spawn_linked(None, Scheduler, token, supervisor).await?;
    ///     Ok(actor.get_cell())
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn run_while_leader<F, Fut>(&self, spawn: F) -> Result<(), LockError>
    where
        F: Fn(u64, ActorCell) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ActorCell, SpawnErr>> + Send + 'static,
    {
        self.campaign.run_while_held(spawn)
    }
}

impl Election {
    /// The campaign engine behind this election.
    pub(crate) fn engine(&self) -> &Campaign<ElectionEvent> {
        &self.campaign
    }
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Election")
            .field("name", self.campaign.lock().name())
            .finish()
    }
}
