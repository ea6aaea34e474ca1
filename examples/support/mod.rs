//! What the examples share: where their store comes from, and their metrics endpoint.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use mongolock::{LockName, MemoryStore, MongoStore, store::LockStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The store the example's workers share: one embedded store, or a MongoDB server where
/// every worker gets its own client (as separate processes would).
#[derive(Clone)]
pub(crate) enum Backend {
    Memory(MemoryStore),
    Mongo { uri: String },
}

impl Backend {
    pub(crate) fn new(mongodb_uri: Option<String>) -> Self {
        match mongodb_uri {
            Some(uri) => Self::Mongo { uri },
            None => Self::Memory(MemoryStore::new()),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Memory(_) => "the embedded store (no server)".to_owned(),
            Self::Mongo { uri } => format!("MongoDB at {uri}"),
        }
    }

    /// A store handle for one worker.
    pub(crate) async fn connect(&self) -> Result<Arc<dyn LockStore>, String> {
        match self {
            Self::Memory(store) => Ok(Arc::new(store.clone())),
            Self::Mongo { uri } => {
                let client = mongodb::Client::with_uri_str(uri)
                    .await
                    .map_err(|e| format!("cannot use MongoDB URI {uri}: {e}"))?;
                Ok(Arc::new(MongoStore::new(
                    client.database("mongolock_examples"),
                )))
            }
        }
    }

    /// Deletes a lock's record behind its holder's back (an operator, a TTL monitor).
    pub(crate) async fn delete_record(&self, name: &LockName) -> Result<(), String> {
        match self {
            Self::Memory(store) => {
                store.remove(name);
                Ok(())
            }
            Self::Mongo { uri } => {
                let client = mongodb::Client::with_uri_str(uri)
                    .await
                    .map_err(|e| e.to_string())?;
                let collection = client
                    .database("mongolock_examples")
                    .collection::<mongodb::bson::Document>(MongoStore::DEFAULT_COLLECTION);
                collection
                    .delete_one(mongodb::bson::doc! { "_id": name.as_str() })
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        }
    }
}

/// Serves Prometheus metrics on 127.0.0.1:`port` (0 picks a free port); returns the port.
pub(crate) fn serve_metrics(port: u16) -> Result<u16, String> {
    let port = if port == 0 { free_port()? } else { port };
    mongolock::metrics::install_prometheus_exporter(([127, 0, 0, 1], port).into())
        .map_err(|e| format!("cannot serve metrics on port {port}: {e}"))?;
    Ok(port)
}

#[path = "../../tests/support/net.rs"]
mod net;

fn free_port() -> Result<u16, String> {
    net::free_port().map_err(|e| e.to_string())
}

/// Fetches this process' own `/metrics` page, the way Prometheus would.
pub(crate) async fn scrape(port: u16) -> Result<String, String> {
    let fetch = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await?;
        let mut body = String::new();
        stream.read_to_string(&mut body).await?;
        Ok::<_, std::io::Error>(body)
    };
    match tokio::time::timeout(Duration::from_secs(5), fetch).await {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("scrape timed out".to_owned()),
    }
}

/// Seconds since `start`, for log lines.
pub(crate) fn at(start: tokio::time::Instant) -> String {
    format!("t+{:>6.3}s", start.elapsed().as_secs_f64())
}
