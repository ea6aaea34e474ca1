//! The `mongolock_leader{election}` gauge: 1 while this process leads the election, else 0.

use crate::campaign::EventSink;
use crate::metrics::LEADER;
use crate::name::LockName;

use super::event::ElectionEvent;

/// A sink that keeps the gauge in step with this candidate's terms; the gauge reads 0 from
/// the moment the candidate exists.
pub(crate) fn sink(election: &LockName) -> EventSink<ElectionEvent> {
    let gauge = metrics::gauge!(LEADER, "election" => election.as_str().to_owned());
    gauge.set(0.0);
    Box::new(move |event| {
        match event {
            ElectionEvent::Elected { .. } => gauge.set(1.0),
            ElectionEvent::Deposed { .. } | ElectionEvent::Resigned { .. } => gauge.set(0.0),
            ElectionEvent::AtRisk { .. }
            | ElectionEvent::Recovered { .. }
            | ElectionEvent::LeaderChanged { .. } => {}
        }
        true
    })
}
