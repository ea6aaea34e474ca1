//! Does the single-lease extend filter `{_id, leaseId, $expr: {$gt: ["$expiresAt",
//! "$$NOW"]}}` stay on the `_id` index as the collection grows, and how does one `updateMany`
//! over many lease ids compare with one update per lease? Run on documents shaped like
//! mongolock's, with its TTL index.

use std::time::{Duration, Instant};

use mongodb::bson::{Bson, DateTime, Document, Uuid, doc};
use mongodb::options::{CollectionOptions, WriteConcern};
use mongodb::{Collection, Database, IndexModel};

use crate::child::{Args, Side, emit, scratch_name};
use crate::support::stats::{median, millis};

const COLLECTION: &str = "explain_locks";

/// The lease the extends here grant: long enough that no document expires while the
/// variants run one after another over the same documents.
const EXTEND_MS: i64 = 3_600_000;

fn unexpired() -> Document {
    doc! { "$gt": ["$expiresAt", "$$NOW"] }
}

fn extend_pipeline() -> Vec<Document> {
    vec![doc! { "$set": { "expiresAt": {
        "$dateAdd": { "startDate": "$$NOW", "unit": "millisecond", "amount": EXTEND_MS }
    } } }]
}

/// The extend with the "still unexpired" check moved from the filter into the pipeline:
/// extends only a live lease, leaves an expired one as it is (no `$expr` in the filter).
fn conditional_extend_pipeline() -> Vec<Document> {
    vec![doc! { "$set": { "expiresAt": { "$cond": [
        { "$gt": ["$expiresAt", "$$NOW"] },
        { "$dateAdd": { "startDate": "$$NOW", "unit": "millisecond", "amount": EXTEND_MS } },
        "$expiresAt",
    ] } } }]
}

/// Replaces the collection's documents with `n` held locks; their names and lease ids.
async fn fill(collection: &Collection<Document>, n: usize) -> Result<Vec<(String, Bson)>, String> {
    collection
        .delete_many(doc! {})
        .await
        .map_err(|e| format!("clear: {e}"))?;
    let now = DateTime::now();
    let later = DateTime::from_millis(now.timestamp_millis() + 3_600_000);
    let locks: Vec<(String, Bson)> = (0..n)
        .map(|i| (format!("lock-{i:06}"), Bson::from(Uuid::new())))
        .collect();
    let documents: Vec<Document> = locks
        .iter()
        .zip(1_i64..)
        .map(|((name, lease), token)| {
            doc! {
                "_id": name, "leaseId": lease.clone(), "holder": "bench:1:explain",
                "expiresAt": later, "acquiredAt": now, "token": token,
            }
        })
        .collect();
    for chunk in documents.chunks(5000) {
        collection
            .insert_many(chunk.to_vec())
            .await
            .map_err(|e| format!("insert: {e}"))?;
    }
    Ok(locks)
}

/// A single-lease filter built from a lock's name and lease id.
type Filter<'a> = &'a dyn Fn(&str, &Bson) -> Document;

/// A labelled way to extend one lease: its filter and its update pipeline.
type Variant<'a> = (&'a str, Filter<'a>, fn() -> Vec<Document>);

/// The stages of the winning plan, outermost first (`UPDATE <- IDHACK`), with index names,
/// and the examined counts when the server reports them.
async fn explain(database: &Database, update: Document) -> Result<String, String> {
    let answer = database
        .run_command(doc! {
            "explain": { "update": COLLECTION, "updates": [update] },
            "verbosity": "executionStats",
        })
        .await
        .map_err(|e| format!("explain: {e}"))?;
    let mut stages = Vec::new();
    if let Ok(planner) = answer.get_document("queryPlanner")
        && let Ok(plan) = planner.get_document("winningPlan")
    {
        collect_stages(plan, &mut stages);
    }
    let mut summary = if stages.is_empty() {
        let text = answer.to_string();
        format!(
            "(no winningPlan) {}",
            text.chars().take(200).collect::<String>()
        )
    } else {
        stages.join(" <- ")
    };
    if let Ok(stats) = answer.get_document("executionStats") {
        let number = |key: &str| match stats.get(key) {
            Some(Bson::Int32(v)) => Some(i64::from(*v)),
            Some(Bson::Int64(v)) => Some(*v),
            #[allow(clippy::cast_possible_truncation)]
            Some(Bson::Double(v)) => Some(*v as i64),
            _ => None,
        };
        if let (Some(keys), Some(docs)) = (number("totalKeysExamined"), number("totalDocsExamined"))
        {
            summary.push_str(&format!(" (keys {keys}, docs {docs} examined)"));
        }
    }
    Ok(summary.replace('|', "/"))
}

fn collect_stages(plan: &Document, stages: &mut Vec<String>) {
    if let Ok(stage) = plan.get_str("stage") {
        match plan.get_str("indexName") {
            Ok(index) => stages.push(format!("{stage}({index})")),
            Err(_) => stages.push(stage.to_owned()),
        }
    }
    for key in ["inputStage", "queryPlan"] {
        if let Ok(input) = plan.get_document(key) {
            collect_stages(input, stages);
        }
    }
    if let Ok(inputs) = plan.get_array("inputStages") {
        for input in inputs {
            if let Bson::Document(input) = input {
                collect_stages(input, stages);
            }
        }
    }
}

/// Sequential single-lease updates with `filter(name, lease)`; updates per second.
async fn singles(
    collection: &Collection<Document>,
    locks: &[(String, Bson)],
    filter: impl Fn(&str, &Bson) -> Document,
    pipeline: fn() -> Vec<Document>,
) -> Result<f64, String> {
    let started = Instant::now();
    for (name, lease) in locks {
        let result = collection
            .update_one(filter(name, lease), pipeline())
            .await
            .map_err(|e| format!("update: {e}"))?;
        if result.matched_count != 1 {
            return Err(format!(
                "single update of {name} matched {}",
                result.matched_count
            ));
        }
    }
    #[allow(clippy::cast_precision_loss)]
    Ok(locks.len() as f64 / started.elapsed().as_secs_f64())
}

/// One `updateMany` with `filter`, `times` times; the median duration and matched count.
async fn batch(
    collection: &Collection<Document>,
    filter: &Document,
    pipeline: fn() -> Vec<Document>,
    times: usize,
) -> Result<(Duration, u64), String> {
    let mut durations = Vec::new();
    let mut matched = 0;
    for _ in 0..times {
        let started = Instant::now();
        let result = collection
            .update_many(filter.clone(), pipeline())
            .await
            .map_err(|e| format!("updateMany: {e}"))?;
        durations.push(millis(started.elapsed()));
        matched = result.matched_count;
    }
    let ms = median(&durations).unwrap_or(0.0);
    Ok((Duration::from_secs_f64(ms / 1e3), matched))
}

/// Figures for the single-lease extend at each size in `sizes` and for a batch of `batch`
/// leases at the largest size.
pub(crate) async fn explain_scenario(args: &Args) -> Result<(), String> {
    let sizes: Vec<usize> = args
        .text("sizes", "1000,10000")
        .split(',')
        .filter_map(|n| n.parse().ok())
        .collect();
    let single_count = args.get("singles", 1000_usize);
    let batch_size = args.get("batch", 1000_usize);
    let side = Side::connect("explain", &scratch_name("explain")).await?;
    let collection: Collection<Document> = side.database.collection_with_options(
        COLLECTION,
        CollectionOptions::builder()
            .write_concern(WriteConcern::majority())
            .build(),
    );
    collection
        .create_index(
            IndexModel::builder()
                .keys(doc! { "expiresAt": 1 })
                .options(
                    mongodb::options::IndexOptions::builder()
                        .name("expiresAt_ttl".to_owned())
                        .expire_after(Duration::ZERO)
                        .build(),
                )
                .build(),
        )
        .await
        .map_err(|e| format!("TTL index: {e}"))?;
    let with_expr = |name: &str, lease: &Bson| {
        doc! { "_id": name, "leaseId": lease.clone(), "$expr": unexpired() }
    };
    let without_expr = |name: &str, lease: &Bson| doc! { "_id": name, "leaseId": lease.clone() };
    let id_expr = |name: &str, _: &Bson| doc! { "_id": name, "$expr": unexpired() };
    for &size in &sizes {
        let locks = fill(&collection, size).await?;
        let Some((name, lease)) = locks.last() else {
            continue;
        };
        let plan = explain(
            &side.database,
            doc! { "q": with_expr(name, lease), "u": extend_pipeline() },
        )
        .await?;
        emit(&format!("plan_expr_{size}"), plan);
        let plan = explain(
            &side.database,
            doc! { "q": without_expr(name, lease), "u": extend_pipeline() },
        )
        .await?;
        emit(&format!("plan_noexpr_{size}"), plan);
        let sample = &locks[locks.len().saturating_sub(single_count)..];
        let variants: [Variant<'_>; 4] = [
            ("expr", &with_expr, extend_pipeline),
            ("noexpr", &without_expr, extend_pipeline),
            ("id_expr", &id_expr, extend_pipeline),
            ("cond_pipeline", &without_expr, conditional_extend_pipeline),
        ];
        for (label, filter, pipeline) in variants {
            let rate = singles(&collection, sample, filter, pipeline).await?;
            emit(
                &format!("singles_{label}_{size}_per_s"),
                format!("{rate:.0}"),
            );
        }
    }
    // Batches at the largest size (the collection holds it now).
    let Some(&largest) = sizes.iter().max() else {
        return Ok(());
    };
    let locks = fill(&collection, largest).await?;
    let chosen = &locks[locks.len().saturating_sub(batch_size)..];
    let leases: Vec<Bson> = chosen.iter().map(|(_, lease)| lease.clone()).collect();
    let names: Vec<&str> = chosen.iter().map(|(name, _)| name.as_str()).collect();
    emit("batch_size", chosen.len());
    emit("batch_docs", largest);
    let sequential = singles(&collection, chosen, with_expr, extend_pipeline).await?;
    #[allow(clippy::cast_precision_loss)]
    emit(
        "batch_singles_ms",
        format!("{:.1}", 1e3 * chosen.len() as f64 / sequential),
    );
    let by_lease = doc! { "leaseId": { "$in": leases.clone() }, "$expr": unexpired() };
    let by_name_and_lease = doc! {
        "_id": { "$in": names.clone() }, "leaseId": { "$in": leases.clone() }, "$expr": unexpired()
    };
    let by_name_and_lease_only = doc! {
        "_id": { "$in": names }, "leaseId": { "$in": leases }
    };
    let (took, matched) = batch(
        &collection,
        &by_name_and_lease_only,
        conditional_extend_pipeline,
        5,
    )
    .await?;
    emit(
        "batch_id_lease_cond_pipeline_ms",
        format!("{:.1}", millis(took)),
    );
    emit("batch_id_lease_cond_pipeline_matched", matched);
    for (label, filter) in [("lease", &by_lease), ("id_lease", &by_name_and_lease)] {
        let (took, matched) = batch(&collection, filter, extend_pipeline, 5).await?;
        emit(&format!("batch_{label}_ms"), format!("{:.1}", millis(took)));
        emit(&format!("batch_{label}_matched"), matched);
        let plan = explain(
            &side.database,
            doc! { "q": filter.clone(), "u": extend_pipeline(), "multi": true },
        )
        .await?;
        emit(&format!("batch_{label}_plan"), plan);
    }
    collection
        .create_index(IndexModel::builder().keys(doc! { "leaseId": 1 }).build())
        .await
        .map_err(|e| format!("leaseId index: {e}"))?;
    let (took, matched) = batch(&collection, &by_lease, extend_pipeline, 5).await?;
    emit("batch_lease_indexed_ms", format!("{:.1}", millis(took)));
    emit("batch_lease_indexed_matched", matched);
    let plan = explain(
        &side.database,
        doc! { "q": by_lease, "u": extend_pipeline(), "multi": true },
    )
    .await?;
    emit("batch_lease_indexed_plan", plan);
    side.drop_database().await;
    Ok(())
}
