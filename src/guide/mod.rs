//! The guide: what the API reference does not say in one place.
