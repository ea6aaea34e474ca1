//! The actor runtime behind the public API: one [`supervisor`] per manager, one
//! [`lock`] actor per active lock name.

pub(crate) mod backoff;
pub(crate) mod campaign;
pub(crate) mod lock;
pub(crate) mod store_call;
pub(crate) mod supervisor;
