//! What `mongolock run` holds — a lock, a permit of a semaphore, a read or the write lock of
//! a reader/writer lock, or several locks at once — behind one way to acquire, describe,
//! watch and release it, so the rest of `run` does not care which.

use std::time::Duration;

use mongolock::{
    Access, Holding, Lock, LockError, LockGuard, LockKind, LockManager, LockName, LockRecord,
    MultiLock, MultiLockGuard, RwLock, Semaphore,
};

use super::error::Blocker;
use super::{CliError, RunArgs, duration};

/// How many holders a message names before it only counts the rest.
const HOLDERS_SHOWN: usize = 3;

/// What the command line asks to hold, checked before any I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ask {
    /// `--lock NAME`: the lock.
    Lock(LockName),
    /// `--lock NAME --permits N`: a permit of the semaphore of N.
    Permit(LockName, u32),
    /// `--lock NAME --shared`: a read lock.
    Read(LockName),
    /// `--lock NAME --exclusive`: the write lock.
    Write(LockName),
    /// `--lock A --lock B…`: every lock, in byte order, each once (at least two).
    All(Vec<LockName>),
}

impl Ask {
    /// Reads `--lock`, `--shared`, `--exclusive` and `--permits`.
    ///
    /// Errors: [`CliError::Usage`] for an invalid name, for several names with
    /// `--shared`, `--exclusive`, `--permits` (those are one lock's) or `--arrival-order`
    /// (the library's multi-locks refuse it), and for a comma in a name among several (it
    /// separates `MONGOLOCK_TOKENS`).
    pub(super) fn from_args(args: &RunArgs) -> Result<Self, CliError> {
        let mut names = args
            .lock
            .iter()
            .map(|name| LockName::new(name).map_err(|error| CliError::Usage(error.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        names.sort();
        names.dedup();
        let ask = match (names.as_slice(), args.shared, args.exclusive, args.permits) {
            ([name], false, false, None) => Self::Lock(name.clone()),
            ([name], true, _, _) => Self::Read(name.clone()),
            ([name], _, true, _) => Self::Write(name.clone()),
            ([name], _, _, Some(permits)) => Self::Permit(name.clone(), permits),
            ([_, _, ..], false, false, None) => {
                if let Some(name) = names.iter().find(|name| name.as_str().contains(',')) {
                    return Err(CliError::Usage(format!(
                        "lock name {:?} contains a comma, which separates the locks in MONGOLOCK_TOKENS: with several --lock, names cannot contain one",
                        name.as_str()
                    )));
                }
                if args.arrival_order {
                    return Err(CliError::Usage(format!(
                        "--arrival-order is for one lock, but --lock was given {} names: several --lock are taken one after another and never wait in line",
                        names.len()
                    )));
                }
                Self::All(names)
            }
            _ => {
                let flag = if args.shared {
                    "--shared"
                } else if args.exclusive {
                    "--exclusive"
                } else {
                    "--permits"
                };
                return Err(CliError::Usage(format!(
                    "{flag} is for one lock, but --lock was given {} names: several --lock take plain locks, all at once",
                    names.len()
                )));
            }
        };
        Ok(ask)
    }

    /// The names, in the order they are taken.
    fn names(&self) -> &[LockName] {
        match self {
            Self::Lock(name) | Self::Permit(name, _) | Self::Read(name) | Self::Write(name) => {
                std::slice::from_ref(name)
            }
            Self::All(names) => names,
        }
    }

    /// What is asked for, in messages: `lock "x"`, `a permit of semaphore "x"`, `a read
    /// lock on "x"`, `the write lock on "x"`, `locks "a", "b"`.
    pub(super) fn asked(&self) -> String {
        match self {
            Self::Lock(name) => format!("lock {:?}", name.as_str()),
            Self::Permit(name, _) => format!("a permit of semaphore {:?}", name.as_str()),
            Self::Read(name) => format!("a read lock on {:?}", name.as_str()),
            Self::Write(name) => format!("the write lock on {:?}", name.as_str()),
            Self::All(names) => {
                let shown: Vec<String> = names
                    .iter()
                    .map(|name| format!("{:?}", name.as_str()))
                    .collect();
                format!("locks {}", shown.join(", "))
            }
        }
    }

    /// What the guard on `name` holds, in messages: [`asked`](Self::asked), or `lock "a"`
    /// for one of several.
    pub(super) fn held(&self, name: &LockName) -> String {
        match self {
            Self::All(_) => format!("lock {:?}", name.as_str()),
            _ => self.asked(),
        }
    }

    /// The lock `name` as a blocker names it: `lock "x"`, `semaphore "x"` or
    /// `reader/writer lock "x"`.
    fn subject(&self, name: &LockName) -> String {
        match self {
            Self::Permit(..) => format!("semaphore {:?}", name.as_str()),
            Self::Read(_) | Self::Write(_) => format!("reader/writer lock {:?}", name.as_str()),
            Self::Lock(_) | Self::All(_) => format!("lock {:?}", name.as_str()),
        }
    }

    /// The blocker when the store no longer says who holds the lock.
    pub(super) fn unknown_blocker(&self) -> Blocker {
        let subject = match self {
            Self::All(_) => format!("one of {}", self.asked()),
            _ => self.subject(&self.names()[0]),
        };
        Blocker {
            subject,
            state: "held".to_owned(),
        }
    }
}

/// The handle that acquires what an [`Ask`] asks for.
enum Handle {
    Lock(Lock),
    Permit(Semaphore),
    Read(RwLock),
    Write(RwLock),
    All(MultiLock),
}

/// What to acquire, with a handle per name for saying who holds it meanwhile.
pub(super) struct Target {
    ask: Ask,
    handle: Handle,
    /// One plain handle per name, only to inspect the records.
    members: Vec<Lock>,
}

impl Target {
    /// The handles for `ask` on `manager` (no I/O).
    pub(super) fn new(manager: &LockManager, ask: Ask) -> Result<Self, LockError> {
        let handle = match &ask {
            Ask::Lock(name) => Handle::Lock(manager.lock(name.as_str())?),
            Ask::Permit(name, permits) => {
                Handle::Permit(manager.semaphore(name.as_str(), *permits)?)
            }
            Ask::Read(name) => Handle::Read(manager.rw_lock(name.as_str())?),
            Ask::Write(name) => Handle::Write(manager.rw_lock(name.as_str())?),
            Ask::All(names) => Handle::All(manager.multi_lock(names.iter().map(LockName::as_str))?),
        };
        let members = ask
            .names()
            .iter()
            .map(|name| manager.lock(name.as_str()))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            ask,
            handle,
            members,
        })
    }

    /// What is asked for.
    pub(super) fn ask(&self) -> &Ask {
        &self.ask
    }

    /// One attempt: `None` if it is held elsewhere.
    pub(super) async fn try_acquire(&self) -> Result<Option<Held>, LockError> {
        Ok(match &self.handle {
            Handle::Lock(lock) => lock.try_acquire().await?.map(Held::One),
            Handle::Permit(semaphore) => semaphore.try_acquire().await?.map(Held::One),
            Handle::Read(rw) => rw.try_read().await?.map(Held::One),
            Handle::Write(rw) => rw.try_write().await?.map(Held::One),
            Handle::All(all) => all.try_acquire().await?.map(Held::All),
        })
    }

    /// Waits until it is held.
    pub(super) async fn acquire(&self) -> Result<Held, LockError> {
        Ok(match &self.handle {
            Handle::Lock(lock) => Held::One(lock.acquire().await?),
            Handle::Permit(semaphore) => Held::One(semaphore.acquire().await?),
            Handle::Read(rw) => Held::One(rw.read().await?),
            Handle::Write(rw) => Held::One(rw.write().await?),
            Handle::All(all) => Held::All(all.acquire().await?),
        })
    }

    /// Waits at most `timeout` ([`LockError::Timeout`] after it, with nothing held).
    pub(super) async fn acquire_timeout(&self, timeout: Duration) -> Result<Held, LockError> {
        Ok(match &self.handle {
            Handle::Lock(lock) => Held::One(lock.acquire_timeout(timeout).await?),
            Handle::Permit(semaphore) => Held::One(semaphore.acquire_timeout(timeout).await?),
            Handle::Read(rw) => Held::One(rw.read_timeout(timeout).await?),
            Handle::Write(rw) => Held::One(rw.write_timeout(timeout).await?),
            Handle::All(all) => Held::All(all.acquire_timeout(timeout).await?),
        })
    }

    /// Who holds it now, as the store says (`None`: nobody, or the store did not answer).
    /// `detailed` adds each holder's token and time left.
    pub(super) async fn blocker(&self, detailed: bool) -> Option<Blocker> {
        let records = futures::future::join_all(self.members.iter().map(Lock::inspect)).await;
        self.members
            .iter()
            .zip(records)
            .find_map(|(member, record)| {
                let record = record.ok().flatten()?;
                let state = describe(&self.ask, &record, detailed)?;
                Some(Blocker {
                    subject: self.ask.subject(member.name()),
                    state,
                })
            })
    }
}

/// How `record` is held, as the state of a [`Blocker`]: `held by H`, `full: 2 permits held
/// by H1, H2`, `write-locked by H`, `read-locked by H1, H2`; `None` if it is free.
fn describe(ask: &Ask, record: &LockRecord, detailed: bool) -> Option<String> {
    let mut holders = record.holders.clone();
    if holders.is_empty() {
        // A record that names only its holder.
        let holder = record.holder().cloned()?;
        let left = record.expires_in().unwrap_or_default();
        holders.push(Holding::new(holder, record.token, Access::Exclusive, left));
    }
    let by = holder_list(&holders, detailed);
    Some(match (ask, record.kind) {
        (Ask::Permit(..), LockKind::Semaphore { permits }) => {
            let held = holders.len();
            let of = usize::try_from(permits).unwrap_or(usize::MAX);
            if held >= of {
                format!("full: {held} permits held by {by}")
            } else {
                format!("{held} of {permits} permits held by {by}")
            }
        }
        (_, LockKind::ReadWrite)
            if holders
                .iter()
                .any(|holding| holding.access == Access::Write) =>
        {
            format!("write-locked by {by}")
        }
        (_, LockKind::ReadWrite) => format!("read-locked by {by}"),
        _ => format!("held by {by}"),
    })
}

/// `H1, H2 and 3 more`, or with `detailed` `H1 (token 5, lease ends in 3s), …`.
fn holder_list(holders: &[Holding], detailed: bool) -> String {
    let shown: Vec<String> = holders
        .iter()
        .take(HOLDERS_SHOWN)
        .map(|holding| {
            if detailed {
                format!(
                    "{} (token {}, lease ends in {})",
                    holding.holder,
                    holding.token,
                    duration::show(holding.expires_in)
                )
            } else {
                holding.holder.to_string()
            }
        })
        .collect();
    match holders.len().saturating_sub(HOLDERS_SHOWN) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// What is held: one guard, or a guard over several.
pub(super) enum Held {
    /// A lock, a permit, or a read or write lock.
    One(LockGuard),
    /// Several locks.
    All(MultiLockGuard),
}

impl Held {
    /// Every lock's own guard, in the order they were taken: each has its name, token and
    /// loss signal.
    pub(super) fn guards(&self) -> &[LockGuard] {
        match self {
            Self::One(guard) => std::slice::from_ref(guard),
            Self::All(all) => all.guards(),
        }
    }

    /// Each lock's name and token, in the order they were taken.
    pub(super) fn tokens(&self) -> Vec<(&str, u64)> {
        self.guards()
            .iter()
            .map(|guard| (guard.name().as_str(), guard.token()))
            .collect()
    }

    /// Releases everything; [`LockError::Lost`] if anything was lost first.
    pub(super) async fn release(self) -> Result<(), LockError> {
        match self {
            Self::One(guard) => guard.release().await,
            Self::All(all) => all.release().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn ask(flags: &[&str]) -> Result<Ask, CliError> {
        let mut args = vec!["mongolock", "run"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "true"]);
        match Cli::try_parse_from(args).map(|cli| cli.command) {
            Ok(Command::Run(run)) => Ask::from_args(&run),
            other => panic!("not run: {other:?}"),
        }
    }

    fn name(text: &str) -> LockName {
        LockName::new(text).unwrap()
    }

    #[test]
    fn flags_choose_what_is_held() {
        assert_eq!(ask(&["--lock", "x"]).unwrap(), Ask::Lock(name("x")));
        assert_eq!(
            ask(&["--lock", "x", "--shared"]).unwrap(),
            Ask::Read(name("x"))
        );
        assert_eq!(
            ask(&["--lock", "x", "--exclusive"]).unwrap(),
            Ask::Write(name("x"))
        );
        assert_eq!(
            ask(&["--lock", "x", "--permits", "3"]).unwrap(),
            Ask::Permit(name("x"), 3)
        );
        assert_eq!(
            ask(&["--lock", "b", "--lock", "a", "--lock", "b"]).unwrap(),
            Ask::All(vec![name("a"), name("b")]),
            "byte order, each once"
        );
        assert_eq!(
            ask(&["--lock", "x", "--lock", "x", "--shared"]).unwrap(),
            Ask::Read(name("x")),
            "one name given twice is one lock"
        );
    }

    #[test]
    fn several_locks_refuse_the_flags_of_one_and_commas() {
        for flags in [
            &["--lock", "a", "--lock", "b", "--shared"][..],
            &["--lock", "a", "--lock", "b", "--exclusive"],
            &["--lock", "a", "--lock", "b", "--permits", "2"],
        ] {
            let error = ask(flags).unwrap_err();
            assert_eq!(error.exit_code(), 64, "{flags:?}");
            assert!(
                error
                    .one_line()
                    .contains("is for one lock, but --lock was given 2 names"),
                "{}",
                error.one_line()
            );
        }
        let in_line = ask(&["--lock", "a", "--lock", "b", "--arrival-order"]).unwrap_err();
        assert_eq!(in_line.exit_code(), 64);
        assert!(
            in_line
                .one_line()
                .starts_with("--arrival-order is for one lock, but --lock was given 2 names"),
            "{}",
            in_line.one_line()
        );
        assert_eq!(
            ask(&["--lock", "x", "--permits", "2", "--arrival-order"]).unwrap(),
            Ask::Permit(name("x"), 2)
        );
        let comma = ask(&["--lock", "a,b", "--lock", "c"]).unwrap_err();
        assert!(
            comma.one_line().contains("contains a comma"),
            "{}",
            comma.one_line()
        );
        assert!(ask(&["--lock", "a,b"]).is_ok(), "one lock may have a comma");
        assert_eq!(ask(&["--lock", ""]).unwrap_err().exit_code(), 64);
    }

    #[test]
    fn the_flags_of_one_lock_exclude_each_other_and_counts_are_bounded() {
        for flags in [
            &["--lock", "x", "--shared", "--exclusive"][..],
            &["--lock", "x", "--shared", "--permits", "2"],
            &["--lock", "x", "--exclusive", "--permits", "2"],
            &["--lock", "x", "--permits", "0"],
            &["--lock", "x", "--permits", "1001"],
        ] {
            let mut args = vec!["mongolock", "run"];
            args.extend_from_slice(flags);
            args.extend_from_slice(&["--", "true"]);
            assert!(Cli::try_parse_from(args).is_err(), "{flags:?}");
        }
        assert_eq!(
            ask(&["--lock", "x", "--permits", "1000"]).unwrap(),
            Ask::Permit(name("x"), 1000)
        );
    }

    #[test]
    fn messages_name_what_is_asked_and_who_is_in_the_way() {
        assert_eq!(Ask::Lock(name("x")).asked(), "lock \"x\"");
        assert_eq!(
            Ask::Permit(name("x"), 2).asked(),
            "a permit of semaphore \"x\""
        );
        assert_eq!(Ask::Read(name("x")).asked(), "a read lock on \"x\"");
        assert_eq!(Ask::Write(name("x")).asked(), "the write lock on \"x\"");
        let all = Ask::All(vec![name("a"), name("b")]);
        assert_eq!(all.asked(), "locks \"a\", \"b\"");
        assert_eq!(all.held(&name("b")), "lock \"b\"");
        assert_eq!(all.unknown_blocker().subject, "one of locks \"a\", \"b\"");

        let holding = |id: &str, token, access| {
            Holding::new(
                mongolock::HolderId::from_string(id.into()),
                token,
                access,
                Duration::from_secs(9),
            )
        };
        let permit = Access::Permit { permits: 2 };
        let full = LockRecord::shared(
            LockKind::Semaphore { permits: 2 },
            6,
            vec![holding("h1", 5, permit), holding("h2", 6, permit)],
        );
        let semaphore = Ask::Permit(name("x"), 2);
        assert_eq!(
            describe(&semaphore, &full, false).unwrap(),
            "full: 2 permits held by h1, h2"
        );
        assert_eq!(
            describe(&semaphore, &full, true).unwrap(),
            "full: 2 permits held by h1 (token 5, lease ends in 9s), h2 (token 6, lease ends in 9s)"
        );
        let writer =
            LockRecord::shared(LockKind::ReadWrite, 8, vec![holding("w", 8, Access::Write)]);
        assert_eq!(
            describe(&Ask::Read(name("x")), &writer, false).unwrap(),
            "write-locked by w"
        );
        let readers: Vec<Holding> = (1..=5)
            .map(|at| holding(&format!("r{at}"), at, Access::Read))
            .collect();
        let read = LockRecord::shared(LockKind::ReadWrite, 5, readers);
        assert_eq!(
            describe(&Ask::Write(name("x")), &read, false).unwrap(),
            "read-locked by r1, r2, r3 and 2 more"
        );
        let mutex = LockRecord::held(
            mongolock::HolderId::from_string("m".into()),
            3,
            Duration::from_secs(12),
        );
        assert_eq!(
            describe(&Ask::Lock(name("x")), &mutex, true).unwrap(),
            "held by m (token 3, lease ends in 12s)"
        );
        assert_eq!(
            describe(&Ask::Lock(name("x")), &LockRecord::free(3), false),
            None
        );
    }
}
