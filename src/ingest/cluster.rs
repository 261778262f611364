//! One cluster's ingest in two halves: metering (with what each batch carries to the next) and storing (every
//! batch under one run). A backfill runs them side by side — a batch is metered while the one before it is
//! written — and the worker one after the other.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use sqlx::PgPool;

use super::carry::CarriedDevices;
use super::fetch::{self, FetchSpec, Fetched};
use super::source::SampleSource;
use super::store::{Fence, HourOutcome, MeteredHour, RunStart, store_batch};
use super::window::HOUR_MS;
use super::{IngestError, IngestOptions, IngestSummary, WriteMode};
use crate::db;
use crate::metering::{Anomaly, AnomalyKind, HourInput, MeterConfig, meter_hour, node_facts};
use crate::prom::{PromError, RetryPolicy};
use crate::shutdown::Stop;
use crate::telemetry::ingest as telemetry;

/// Rows a backfill stores between two looks at the tables' statistics (and the least change that is analyzed).
const ANALYZE_EVERY_ROWS: u64 = 20_000;

/// Reads the raw samples of some consecutive hours (one window), retried per the options, with the devices of its
/// trailing day if `trailing` (else [`MeterStage::meter`] takes them from the windows before, or reads them);
/// with the time it took.
pub async fn read_batch(
    source: &SampleSource,
    opts: &IngestOptions,
    hours: &[DateTime<Utc>],
    trailing: bool,
) -> Result<(Fetched, Duration), PromError> {
    let start = hours[0].timestamp_millis();
    let end = start + hours.len() as i64 * HOUR_MS;
    let started = Instant::now();
    let ksm_margin = fetch::ksm_margin_ms(&opts.meter);
    let margins = (ksm_margin, opts.meter.ksm_gap_bridge_ms());
    let read = fetch::fetch(source, &opts.fetch, margins, (start, end), trailing, opts.retry);
    let read = telemetry::reading(&opts.cluster, read).await?;
    telemetry::chunk_read(&opts.cluster, source.kind().as_str(), read.samples_read, started.elapsed());
    Ok((read, started.elapsed()))
}

/// One cluster's ingest, batch by batch: its metering half and its storing half.
pub struct ClusterIngest<'a> {
    pub(super) metering: MeterStage<'a>,
    pub(super) storing: StoreStage<'a>,
}

/// Metering batches in order: the cluster's metering configuration (with the nodes configured for it) and the
/// DCGM devices the last batch carries to the next.
pub struct MeterStage<'a> {
    source: &'a SampleSource,
    cluster: String,
    meter: MeterConfig,
    /// The devices of the last metered window's trailing day and hours, for the next window.
    seen: CarriedDevices,
    fetch: FetchSpec,
    retry: RetryPolicy,
    read_s: f64,
    meter_s: f64,
}

/// Storing metered batches under one run, and what the ingest did so far.
pub struct StoreStage<'a> {
    pool: &'a PgPool,
    source: &'a SampleSource,
    mode: &'a WriteMode,
    span: (DateTime<Utc>, DateTime<Utc>),
    run_id: Option<i64>,
    decode_before: Duration,
    summary: IngestSummary,
    /// Usage rows stored since the statistics were last checked.
    rows_unchecked: u64,
}

/// A batch metered and not yet stored.
pub struct MeteredBatch {
    hours: Vec<DateTime<Utc>>,
    batch: Vec<MeteredHour>,
    timing: telemetry::Batch,
}

impl MeteredBatch {
    /// Dropped unstored (a stop was asked for): neither a success nor a failure.
    pub fn cancel(self) {
        self.timing.cancelled();
    }
}

impl<'a> ClusterIngest<'a> {
    /// Starts an ingest of `opts.cluster` registered as a run of `mode` over `span` (with its first stored batch:
    /// an ingest that stores nothing leaves the database as it was).
    pub async fn new(
        pool: &'a PgPool,
        source: &'a SampleSource,
        opts: &IngestOptions,
        mode: &'a WriteMode,
        span: (DateTime<Utc>, DateTime<Utc>),
    ) -> Result<Self, IngestError> {
        super::validate_cluster_name(&opts.cluster)?;
        // the nodes configured for this cluster (cards, replicas, model, sharing) where nothing on them tells it
        let mut meter = opts.meter.clone();
        let mut conn = pool.acquire().await?;
        for (node, settings) in db::nodes::for_cluster(&mut conn, &opts.cluster).await? {
            meter.nodes.entry(node).or_insert(settings);
        }
        let summary = IngestSummary {
            cluster: opts.cluster.clone(),
            source: source.kind().as_str().to_string(),
            source_reason: source.describe(),
            ..IngestSummary::default()
        };
        Ok(Self {
            metering: MeterStage {
                source,
                cluster: opts.cluster.clone(),
                meter,
                seen: CarriedDevices::default(),
                fetch: opts.fetch.clone(),
                retry: opts.retry,
                read_s: 0.0,
                meter_s: 0.0,
            },
            storing: StoreStage {
                pool,
                source,
                mode,
                span,
                run_id: None,
                decode_before: source.decode_time(),
                summary,
                rows_unchecked: 0,
            },
        })
    }

    /// Whether a window starting at `hour` must read its trailing day's devices (it does not follow the last
    /// window this ingest metered).
    pub fn needs_trailing(&self, hour: DateTime<Utc>) -> bool {
        self.metering.needs_trailing(hour)
    }

    /// Meters a batch read by [`read_batch`] and stores it in one transaction (under `fence` for a worker's
    /// claim). Returns the hours stored or kept: none when `stop` was asked for before the batch was stored.
    pub async fn store(
        &mut self,
        hours: &[DateTime<Utc>],
        data: Fetched,
        read_time: Duration,
        fence: Option<Fence<'_>>,
        stop: &Stop,
    ) -> Result<Vec<DateTime<Utc>>, IngestError> {
        let metered = self.metering.meter(hours, data, read_time).await?;
        if stop.is_requested() {
            metered.cancel();
            return Ok(Vec::new());
        }
        self.storing.store(metered, fence).await
    }

    /// What the ingest did so far.
    pub fn summary(&self) -> &IngestSummary {
        &self.storing.summary
    }

    /// The summary, with the time spent reading, decoding and metering; the statistics of what the ingest grew
    /// are refreshed.
    pub async fn finish(self) -> IngestSummary {
        self.storing.finish(&self.metering).await
    }
}

impl MeterStage<'_> {
    /// Whether a window starting at `hour` must read its trailing day's devices.
    pub fn needs_trailing(&self, hour: DateTime<Utc>) -> bool {
        !self.seen.reaches(hour.timestamp_millis())
    }

    /// Meters a batch read by [`read_batch`] (its hours consecutive, following the last metered batch or not:
    /// a window the carried devices do not reach reads its trailing day now).
    pub async fn meter(
        &mut self,
        hours: &[DateTime<Utc>],
        data: Fetched,
        read_time: Duration,
    ) -> Result<MeteredBatch, IngestError> {
        let timing = telemetry::Batch::since(&self.cluster, Instant::now() - read_time);
        self.read_s += read_time.as_secs_f64();
        let hours_ms: Vec<i64> = hours.iter().map(DateTime::timestamp_millis).collect();
        let mut data = data;
        if !data.has_trailing() && self.needs_trailing(hours[0]) {
            // read without it, expecting to follow a window that was not metered: read it now
            let started = Instant::now();
            let seen = Fetched::trailing_seen(self.source, &self.fetch, hours_ms[0], self.retry).await?;
            data.absorb_seen(seen);
            self.read_s += started.elapsed().as_secs_f64();
        }
        let started = Instant::now();
        let batch = meter_batch(hours, data.into_hours_carrying(&hours_ms, &mut self.seen), &self.meter).await;
        self.meter_s += started.elapsed().as_secs_f64();
        Ok(MeteredBatch { hours: hours.to_vec(), batch, timing })
    }
}

impl StoreStage<'_> {
    /// Stores a metered batch in one transaction (under `fence` for a worker's claim); returns its hours, stored
    /// or kept.
    pub async fn store(
        &mut self,
        metered: MeteredBatch,
        fence: Option<Fence<'_>>,
    ) -> Result<Vec<DateTime<Utc>>, IngestError> {
        let MeteredBatch { hours, batch, timing } = metered;
        let cluster = self.summary.cluster.clone();
        let run = RunStart { source: self.source, mode: self.mode, from: self.span.0, to: self.span.1 };
        let started = Instant::now();
        let stored = store_batch(self.pool, &cluster, &batch, self.run_id, &run, fence).await?;
        self.summary.timings.write_s += started.elapsed().as_secs_f64();
        self.run_id = Some(stored.run_id);
        self.summary.run_id = self.run_id;
        self.summary.watermark = Some(stored.watermark);
        self.summary.batches += 1;
        for (h, outcome) in batch.iter().zip(stored.outcomes) {
            match outcome {
                HourOutcome::Kept(k) => {
                    tracing::warn!(%cluster, hour = %h.hour, stored_rows = k.stored_rows,
                        stored_samples = ?k.stored_samples, read_rows = k.read_rows, read_samples = k.read_samples,
                        "kept the stored hour: this read holds less (source past its retention, restarted without \
                         its data, or the wrong URL?)");
                    self.summary.kept.push(k);
                    telemetry::hour_kept(&cluster);
                }
                HourOutcome::Replaced { changed } => {
                    self.summary.hours_changed += u64::from(changed);
                    self.summary.add(&h.out, h.samples);
                    telemetry::hour_stored(&cluster, &h.out);
                }
            }
            tracing::debug!(%cluster, hour = %h.hour, rows = h.out.rows.len(), "stored hour");
        }
        timing.succeeded();
        self.rows_unchecked += batch.iter().map(|h| h.out.rows.len() as u64).sum::<u64>();
        if self.rows_unchecked >= ANALYZE_EVERY_ROWS {
            self.refresh_statistics().await;
        }
        Ok(hours)
    }

    /// Hours stored or kept so far.
    pub fn hours_done(&self) -> u64 {
        self.summary.hours + self.summary.kept.len() as u64
    }

    /// Analyzes the tables this ingest changed a lot (a failure is logged: statistics are an optimisation).
    async fn refresh_statistics(&mut self) {
        self.rows_unchecked = 0;
        let started = Instant::now();
        match db::usage::analyze_stale(self.pool, ANALYZE_EVERY_ROWS as i64).await {
            Ok(tables) if !tables.is_empty() => {
                tracing::info!(?tables, took = ?started.elapsed(), "refreshed the statistics of tables the backfill grew")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not refresh the tables' statistics"),
        }
        self.summary.timings.write_s += started.elapsed().as_secs_f64();
    }

    /// The summary, with `metering`'s times and the time spent decoding answers; the statistics of what the
    /// ingest grew are refreshed.
    pub async fn finish(mut self, metering: &MeterStage<'_>) -> IngestSummary {
        if self.rows_unchecked > 0 {
            self.refresh_statistics().await;
        }
        self.summary.timings.read_s += metering.read_s;
        self.summary.timings.meter_s += metering.meter_s;
        self.summary.timings.decode_s = self.source.decode_time().saturating_sub(self.decode_before).as_secs_f64();
        self.summary
    }
}

fn input_samples(i: &HourInput) -> u64 {
    let n = i.requests.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.running.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.devices.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.hami.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.namespaces.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.capacity.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.allocatable.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.unschedulable.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.node_labels.iter().map(|s| s.samples.len()).sum::<usize>();
    n as u64
}

/// Meters the hours of a batch on the blocking pool, as many at a time as there are cores (a long batch of a
/// sparse history holds hundreds of hours), the window's NaN/±Inf counts added to each hour's anomalies.
async fn meter_batch(
    hours: &[DateTime<Utc>],
    inputs: Vec<(HourInput, BTreeMap<String, u64>)>,
    cfg: &MeterConfig,
) -> Vec<MeteredHour> {
    let metered = inputs.into_iter().zip(hours).map(|((input, non_finite), &hour)| {
        let cfg = cfg.clone();
        async move {
            let samples = input_samples(&input);
            let (mut out, node_facts) =
                tokio::task::spawn_blocking(move || (meter_hour(&input, &cfg), node_facts(&input, &cfg)))
                    .await
                    .expect("metering is pure and does not panic");
            out.anomalies.extend(non_finite.into_iter().map(|(metric, count)| Anomaly {
                kind: AnomalyKind::NonFiniteSample,
                subject: metric,
                count,
            }));
            MeteredHour { hour, out, samples, node_facts }
        }
    });
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    futures_util::stream::iter(metered).buffered(cores).collect().await
}
