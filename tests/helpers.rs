//! The library's helpers: the holder identity's host part.

use mongolock::store::HolderId;

#[test]
fn the_holder_id_starts_with_the_os_host_name() {
    let output = std::process::Command::new("hostname")
        .output()
        .expect("the `hostname` command runs (Debian: apt-get install hostname)");
    let host = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(!host.is_empty(), "`hostname` printed nothing");
    let id = HolderId::generate();
    assert!(
        id.as_str()
            .starts_with(&format!("{host}:{}:", std::process::id())),
        "{id} does not start with {host}:{}:",
        std::process::id()
    );
}
