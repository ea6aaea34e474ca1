//! End to end with a real Prometheus server: run the contention example, let Prometheus
//! scrape its `/metrics` every second, and query Prometheus' HTTP API until the contention
//! series exist and move as expected. Fails (never skips) when Prometheus is not installed:
//! `scripts/test.sh` installs it.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::{eventually, free_port};

/// Kills the child process when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn prometheus_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("prometheus"))
            .collect::<Vec<_>>()
    });
    on_path
        .chain([PathBuf::from("/usr/bin/prometheus")])
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "Prometheus is not installed: run scripts/test.sh (it installs Debian's \
                 `prometheus` package) or `apt-get install prometheus`"
            )
        })
}

/// The contention example's binary, built next to this test (`cargo test --all-targets`
/// builds examples); built on demand otherwise.
fn contention_example() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let example = profile_dir.join("examples").join("contention");
    if !example.is_file() {
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "--example",
                "contention",
                "--features",
                "prometheus",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the contention example failed");
    }
    assert!(
        example.is_file(),
        "no contention example at {}",
        example.display()
    );
    example
}

/// GET `path` from 127.0.0.1:`port`; the body, or `None` while the server is not up.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then(|| body.to_owned())
        .or_else(|| head.starts_with("HTTP/1.1 200").then(|| body.to_owned()))
}

/// Percent-encodes a `PromQL` expression for a query string.
fn encode(query: &str) -> String {
    query
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Evaluates `scalar(<expr>)` in Prometheus; `None` while there is no data.
/// The answer looks like `{"status":"success","data":{"resultType":"scalar","result":[1700000000.1,"42"]}}`.
fn scalar(port: u16, expr: &str) -> Option<f64> {
    let body = http_get(
        port,
        &format!("/api/v1/query?query={}", encode(&format!("scalar({expr})"))),
    )?;
    let result = body.split(r#""result":["#).nth(1)?;
    let value = result.split(']').next()?.split(',').nth(1)?;
    let number: f64 = value.trim().trim_matches('"').parse().ok()?;
    number.is_finite().then_some(number)
}

#[test]
fn prometheus_scrapes_contention_losses_and_waiters() {
    let prometheus = prometheus_binary();
    let example = contention_example();
    let (metrics_port, web_port) = (free_port(), free_port());
    let dir = std::env::temp_dir().join(format!(
        "mongolock-prom-{}-{metrics_port}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: mongolock\n    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
        ),
    )
    .expect("prometheus.yml");

    let _contention = Running(
        Command::new(&example)
            .args([
                "--metrics-port",
                &metrics_port.to_string(),
                "--duration",
                "90",
                "--inject-loss-every",
                "3",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("the contention example starts"),
    );
    let _prometheus = Running(
        Command::new(&prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{web_port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts"),
    );

    let within = Duration::from_secs(60);
    eventually(within, "Prometheus scrapes the contention example", || {
        scalar(web_port, r#"max(up{job="mongolock"})"#) == Some(1.0)
    });
    eventually(within, "local waiters are seen during contention", || {
        scalar(web_port, "max(max_over_time(mongolock_waiters[1m]))").is_some_and(|v| v > 0.0)
    });
    eventually(within, "contended attempts are counted", || {
        scalar(
            web_port,
            r#"sum(mongolock_acquire_attempts_total{result="contended"})"#,
        )
        .is_some_and(|v| v > 0.0)
    });
    let first = {
        let mut seen = None;
        eventually(within, "acquisitions are counted", || {
            seen = scalar(
                web_port,
                r#"sum(mongolock_acquire_attempts_total{result="acquired"})"#,
            )
            .filter(|v| *v > 0.0);
            seen.is_some()
        });
        seen.unwrap_or_default()
    };
    eventually(within, "the acquisition counter keeps moving", || {
        scalar(
            web_port,
            r#"sum(mongolock_acquire_attempts_total{result="acquired"})"#,
        )
        .is_some_and(|v| v > first)
    });
    eventually(within, "the injected loss is counted", || {
        scalar(
            web_port,
            r#"sum(mongolock_losses_total{reason="superseded"})"#,
        )
        .is_some_and(|v| v >= 1.0)
    });
    eventually(within, "wait-time histogram buckets are exported", || {
        scalar(web_port, "count(mongolock_acquire_wait_seconds_bucket)").is_some_and(|v| v > 0.0)
    });
    eventually(within, "per-lock series carry the lock label", || {
        scalar(
            web_port,
            r#"count(mongolock_acquire_attempts_total{lock="orders-0"})"#,
        )
        .is_some_and(|v| v > 0.0)
    });
    let _ = std::fs::remove_dir_all(&dir);
}
