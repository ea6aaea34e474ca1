//! Loopback ports for test servers (std only, so examples can share it too).

use std::net::TcpListener;

/// A loopback port nobody listens on right now.
pub(crate) fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
