use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

/// The longest lock name accepted, in UTF-8 bytes. Names are stored as document ids; a bound
/// keeps them indexable on every MongoDB version and keeps metrics labels sane.
pub const MAX_LOCK_NAME_BYTES: usize = 1024;

/// A validated lock name: 1 to [`MAX_LOCK_NAME_BYTES`] bytes of UTF-8 without NUL.
///
/// Names are only ever stored and compared as opaque values — `"$gt"`, `"{\"$ne\": 1}"`,
/// `"a.b"` or any Unicode text are ordinary names, never operators, keys or paths. Cloning is
/// cheap (reference counted).
///
/// ```
/// use mongolock::{LockError, LockName};
///
/// assert_eq!(LockName::new("$gt")?.as_str(), "$gt");
/// assert_eq!(LockName::new("注文")?.as_str(), "注文");
/// // Calls that take a name report a bad one as `LockError::InvalidName`.
/// assert!(matches!(LockName::new("").map_err(LockError::from), Err(LockError::InvalidName { .. })));
/// assert!(matches!(LockName::new("a\0b").map_err(LockError::from), Err(LockError::InvalidName { .. })));
/// # Ok::<(), LockError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockName(Arc<str>);

impl LockName {
    /// Validates `name`.
    ///
    /// # Errors
    ///
    /// [`InvalidName`] for an empty name, a name with NUL, or one longer than
    /// [`MAX_LOCK_NAME_BYTES`].
    ///
    /// ```
    /// let name = mongolock::LockName::new("orders")?;
    /// assert_eq!(name.to_string(), "orders");
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn new(name: impl AsRef<str>) -> Result<Self, InvalidName> {
        let name = name.as_ref();
        let reason = if name.is_empty() {
            Some("it is empty".to_owned())
        } else if name.len() > MAX_LOCK_NAME_BYTES {
            Some(format!(
                "it is {} bytes long; the limit is {MAX_LOCK_NAME_BYTES}",
                name.len()
            ))
        } else if name.contains('\0') {
            Some("it contains a NUL character".to_owned())
        } else {
            None
        };
        match reason {
            Some(reason) => Err(InvalidName {
                name: preview(name),
                reason,
            }),
            None => Ok(Self(Arc::from(name))),
        }
    }

    /// The name as text.
    ///
    /// ```
    /// assert_eq!(mongolock::LockName::new("jobs")?.as_str(), "jobs");
    /// # Ok::<(), mongolock::LockError>(())
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A short, printable form of a rejected name for error messages (a 1 MB name must not end
/// up in a log line whole).
fn preview(name: &str) -> String {
    const SHOWN: usize = 64;
    let mut shown: String = name.chars().take(SHOWN).collect();
    if shown.len() < name.len() {
        shown.push('…');
    }
    shown
}

impl fmt::Debug for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for LockName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for LockName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for LockName {
    type Error = InvalidName;

    fn try_from(name: &str) -> Result<Self, Self::Error> {
        Self::new(name)
    }
}

impl TryFrom<String> for LockName {
    type Error = InvalidName;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        Self::new(name)
    }
}

/// A lock name that cannot be used: empty, too long, or containing NUL. Every call that
/// takes a name reports it as [`LockError::InvalidName`](crate::LockError::InvalidName).
///
/// ```
/// let invalid = mongolock::LockName::new("").unwrap_err();
/// assert_eq!(invalid.reason(), "it is empty");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid lock name {name:?}: {reason}")]
pub struct InvalidName {
    name: String,
    reason: String,
}

impl InvalidName {
    /// The name (shortened if long).
    ///
    /// ```
    /// assert_eq!(mongolock::LockName::new("").unwrap_err().name(), "");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What is wrong with it.
    ///
    /// ```
    /// assert_eq!(mongolock::LockName::new("a\0b").unwrap_err().reason(), "it contains a NUL character");
    /// ```
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// Both, for [`LockError::InvalidName`](crate::LockError::InvalidName).
    pub(crate) fn into_parts(self) -> (String, String) {
        (self.name, self.reason)
    }
}
