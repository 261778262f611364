//! `simulate`, `ingest`, `ingest undo`, `worker`, `health`: the simulated cluster, reading Prometheus into the
//! ledger once or continuously, putting back what a run replaced, and whether the stored numbers are complete.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use indicatif::{ProgressBar, ProgressStyle};

use super::{
    HealthArgs, IngestArgs, SimulateArgs, SummaryFormat, UndoArgs, WorkerArgs, cli_actor, operator, resolve_time,
    services,
};
use crate::db;
use crate::ingest::{self, IngestOptions, WorkerOptions, window};
use crate::prom::{PromClient, RetryPolicy};
use crate::simulate;

pub(super) fn simulate_cmd(a: SimulateArgs) -> anyhow::Result<()> {
    let end = match a.end {
        Some(t) => resolve_time("--end", t, crate::billing::DEFAULT_BILLING_TZ)?,
        None => window::floor_hour(Utc::now() - chrono::Duration::hours(4)),
    };
    let hours = a.hours.unwrap_or(a.days.saturating_mul(24));
    let secs = a.scrape_interval.as_secs();
    if a.scrape_interval.subsec_nanos() != 0 || secs > u64::from(u32::MAX) {
        bail!("--scrape-interval must be a whole number of seconds");
    }
    let params = simulate::SimParams {
        gpus: a.gpus,
        hours,
        scrape_interval_s: secs as u32,
        seed: a.seed,
        end,
        out: a.out,
        profile: a.profile,
        ksm_gaps: a.ksm_gaps,
        util_interval_s: a.util_interval.map(|d| d.as_secs() as u32),
    };
    let s = simulate::run(&params)?;
    println!(
        "simulated {} GPUs, {} pods, {} series, {} samples, {} .. {}\n  metrics: {}\n  truth:   {}",
        params.gpus,
        s.pods,
        s.series,
        s.samples,
        s.start.to_rfc3339(),
        s.end.to_rfc3339(),
        s.metrics_path.display(),
        s.truth_path.display()
    );
    Ok(())
}

pub(super) async fn ingest_cmd(a: IngestArgs) -> anyhow::Result<()> {
    let cluster = ingest::config::from_flags(&a.source)?;
    let client = source_client(&cluster)?;
    let pool = a.db.connect(4).await.context("cannot connect to the database")?;
    let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    let (from, to) = (resolve_time("--from", a.from, tz)?, resolve_time("--to", a.to, tz)?);
    let hours = window::hours(from, to)?;
    // a one-off ingest sizes its batches by samples, up to a month of hours unless told otherwise
    let chunk_hours = a.source.chunk_hours.map_or(ingest::plan::MAX_BATCH_HOURS, |n| n as usize);
    let opts = IngestOptions { retry: RetryPolicy::cli(), chunk_hours, ..cluster.ingest };
    let source = ingest::source::choose(&pool, client, &opts.cluster, cluster.source).await?;
    let bar =
        if std::io::stderr().is_terminal() { ProgressBar::new(hours.len() as u64) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:40}] {pos}/{len} h  {elapsed} (eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(format!("ingesting {}", opts.cluster));
    // a signal ends the ingest after the hour being stored; the hours before it stay stored
    let stop = crate::shutdown::on_signals("the ingest", Duration::from_secs(8));
    let by = operator(cli_actor()).writer();
    let mode = ingest::WriteMode { replace_smaller: a.replace_smaller, ..ingest::WriteMode::ingest(&by) };
    let result = ingest::backfill_until(&pool, &source, &opts, from, to, |_| bar.inc(1), &mode, &stop).await;
    bar.finish_and_clear();
    let summary = result.with_context(|| {
        format!("ingest of {} [{from} .. {to}) stopped; hours before the watermark are stored", opts.cluster)
    })?;
    // the ingested hours change the budgets' spend: check them now, not only at the next worker cycle
    if summary.hours_changed > 0 || summary.hours > 0 {
        match crate::usecase::alerts::check_after_ingest(&pool, tz, from, to, a.webhook.as_deref()).await {
            Ok(run) if run.failed > 0 => {
                eprintln!("warning: {} budget alerts could not be delivered; they are retried later", run.failed)
            }
            Ok(_) => {}
            Err(e) => eprintln!("warning: the budget check failed ({e}); the next check records the crossings"),
        }
    }
    match a.format {
        SummaryFormat::Json => println!("{}", serde_json::to_string_pretty(&summary)?),
        SummaryFormat::Text => {
            println!(
                "ingested {} hours of {} ({} rows, {} samples): {:.3} GPU-hours, {:.3} effective, {:.3} unmetered",
                summary.hours,
                summary.cluster,
                summary.usage_rows,
                summary.samples_read,
                summary.gpu_hours,
                summary.effective_gpu_hours,
                summary.unmetered_gpu_hours
            );
            if summary.serving_rows > 0 {
                println!("serving engines: {} rows, {} tokens", summary.serving_rows, summary.tokens);
            }
            let intervals: Vec<String> =
                summary.scrape_intervals_s.iter().map(|(s, n)| format!("{s} s ({n} h)")).collect();
            println!("scrape interval: {}", intervals.join(", "));
            if summary.bridged_gpu_hours > 0.0 {
                println!(
                    "{:.3} GPU-hours bridged over kube-state-metrics gaps (--ksm-gap-bridge)",
                    summary.bridged_gpu_hours
                );
            }
            if let Some(w) = summary.watermark {
                println!("watermark: {}", w.to_rfc3339());
            }
            for (kind, subjects) in &summary.anomalies {
                let total: u64 = subjects.values().sum();
                println!("warning: {kind}: {total} in all");
                for (subject, n) in subjects.iter().take(20) {
                    println!("  {subject}: {n}");
                }
                if subjects.len() > 20 {
                    println!("  … and {} more", subjects.len() - 20);
                }
            }
        }
    }
    if let (SummaryFormat::Text, Some(run)) = (a.format, summary.run_id) {
        match summary.hours_changed {
            0 => println!("run: {run} (no stored hour changed)"),
            n => println!("run: {run} ({n} stored hours changed; `cardhour ingest undo {run}` puts them back)"),
        }
    }
    if summary.stopped {
        bail!(
            "stopped by a signal after {} of {} hours; run the same command again to ingest the rest",
            summary.hours + summary.kept.len() as u64,
            hours.len()
        );
    }
    if !summary.kept.is_empty() {
        eprintln!(
            "kept {} stored hours: this read holds less than what is stored (stored vs read):",
            summary.kept.len()
        );
        for k in &summary.kept {
            eprintln!(
                "  {}",
                stored_vs_read(k.hour, k.stored_rows, k.stored_samples, k.read_rows as i64, k.read_samples as i64)
            );
        }
        bail!(
            "{} hours were kept, not replaced (is the source past its retention, restarted without its data, or the \
             wrong URL?); --replace-smaller replaces them anyway",
            summary.kept.len()
        );
    }
    Ok(())
}

/// The client of a cluster's source, telling it who asks (what is used is logged, never a secret).
fn source_client(c: &ingest::config::ClusterConfig) -> anyhow::Result<PromClient> {
    if !c.auth.is_empty() {
        tracing::info!(cluster = %c.ingest.cluster, auth = %c.auth.describe(), "source authentication");
    }
    PromClient::with_auth(&c.prometheus, c.timeout, c.auth.clone())
        .with_context(|| format!("cluster `{}`: its source at {}", c.ingest.cluster, c.prometheus))
}

/// A kept hour's line: "<hour>: 120 rows / 5000 samples stored, 0 rows / 0 samples read".
fn stored_vs_read(
    hour: DateTime<Utc>,
    stored_rows: i64,
    stored_samples: Option<i64>,
    read_rows: i64,
    read_samples: i64,
) -> String {
    let stored_samples = stored_samples.map_or_else(|| "?".to_string(), |s| s.to_string());
    format!(
        "{}: {stored_rows} rows / {stored_samples} samples stored, {read_rows} rows / {read_samples} samples read",
        hour.to_rfc3339()
    )
}

pub(super) async fn health_cmd(a: HealthArgs) -> anyhow::Result<()> {
    let sv = services(&a.db, 2).await?;
    let health = crate::usecase::health::health(&sv, &crate::access::Scope::all()).await?;
    if a.format == SummaryFormat::Json {
        println!("{}", serde_json::to_string_pretty(&health)?);
        return Ok(());
    }
    let clusters = &health.clusters;
    if clusters.is_empty() {
        println!("no cluster ingested yet");
    }
    let t = |t: Option<DateTime<Utc>>| t.map_or_else(|| "-".to_string(), |t| t.to_rfc3339());
    for c in clusters {
        println!(
            "{}: watermark {}, lag {} h, {} hours stored ({} .. {}), last written {}",
            c.cluster,
            t(c.watermark),
            c.lag_hours.map_or_else(|| "-".to_string(), |l| l.to_string()),
            c.hours_stored,
            t(c.first_hour),
            t(c.last_hour),
            t(c.last_ingested_at)
        );
        if let Some(s) = &c.sample_source {
            println!("  read by {s}: {}", c.sample_source_reason.as_deref().unwrap_or("-"));
        }
        if !c.kept_hours.is_empty() {
            println!("  kept {} stored hours over smaller reads (stored vs read):", c.kept_hours.len());
            for k in c.kept_hours.iter().take(10) {
                let figures =
                    stored_vs_read(k.hour, k.stored_rows.into(), k.stored_samples, k.read_rows.into(), k.read_samples);
                println!("    {figures} (run {})", k.run_id);
            }
        }
        for f in &c.failed_windows {
            println!(
                "  failed read {} .. {} at {}: {} ({} hours not read since)",
                f.from.to_rfc3339(),
                f.to.to_rfc3339(),
                f.failed_at.to_rfc3339(),
                f.error,
                f.hours_not_read_since
            );
        }
        for an in &c.anomalies {
            println!("  anomaly (24 h): {}: {} subjects, {} in all", an.kind, an.subjects, an.count);
        }
        if c.bridged_gpu_hours_24h > 0.0 || !c.ksm_gaps.is_empty() {
            println!("  kube-state-metrics gaps (24 h): {:.3} GPU-hours bridged", c.bridged_gpu_hours_24h);
        }
        for g in &c.ksm_gaps {
            let what = if g.bridged { "bridged" } else { "not billed" };
            println!("    {} {what}: {} pods, {} hours", g.span, g.pods, g.hours);
        }
        if let Some(w) = &c.worker {
            let batch = w.batch_hours.map_or_else(String::new, |b| format!(", batch {b} h"));
            println!("  workers: {} hours queued, {} held {:?}{batch}", w.queued_hours, w.leased_hours, w.workers);
            if w.failures_in_row > 0 || w.failing_hours > 0 {
                let retry = w.next_retry_at.map_or_else(String::new, |r| format!(", next try {}", r.to_rfc3339()));
                println!("    {} failures in a row, {} hours failing{retry}", w.failures_in_row, w.failing_hours);
            }
            if let (Some(kind), Some(at)) = (&w.last_error_kind, w.last_error_at) {
                println!("    last error {} ({kind}): {}", at.to_rfc3339(), w.last_error.as_deref().unwrap_or(""));
            }
            if let Some(r) = w.recovered_at {
                println!("    recovered {}", r.to_rfc3339());
            }
        }
    }
    for m in &health.merged_team_labels {
        println!("team labels {} make one team: {}", m.labels.join(", "), m.team_id);
    }
    Ok(())
}

pub(super) async fn undo_cmd(a: UndoArgs) -> anyhow::Result<()> {
    let pool = a.db.connect(2).await.context("cannot connect to the database")?;
    let s = ingest::undo(&pool, a.run, &operator(cli_actor()).writer()).await?;
    println!(
        "put back {} hours of {} replaced by run {} (as run {}; `cardhour ingest undo {}` reverses this)",
        s.hours.len(),
        s.cluster,
        s.run_id,
        s.undo_run_id,
        s.undo_run_id
    );
    Ok(())
}

pub(super) async fn worker_cmd(a: WorkerArgs) -> anyhow::Result<()> {
    let clusters = match &a.config {
        Some(path) => ingest::config::from_file(path, &a.source)?,
        None => vec![ingest::config::from_flags(&a.source)?],
    };
    let pool = a.db.connect(4 + clusters.len().min(4) as u32).await.context("cannot connect to the database")?;
    crate::telemetry::install("worker");
    let stop = crate::shutdown::on_signals("the worker", a.shutdown_grace);
    if let Some(addr) = a.monitoring.metrics_listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("--metrics-listen: cannot listen on {addr}"))?;
        tracing::info!("metrics on http://{addr}/metrics (and /healthz, /readyz)");
        let (pool, stop) = (pool.clone(), stop.clone());
        tokio::spawn(async move {
            if let Err(e) = crate::http::monitoring::serve(listener, pool, async move { stop.requested().await }).await
            {
                tracing::error!(error = %e, "the metrics port stopped");
            }
        });
    }
    let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    let span = match (a.from, a.to) {
        (Some(from), Some(to)) => {
            let span = (resolve_time("--from", from, tz)?, resolve_time("--to", to, tz)?);
            window::hours(span.0, span.1)?;
            Some(span)
        }
        _ => None,
    };
    // each source probed once per worker start (and remembered with the cluster), not per batch
    let mut sources = Vec::with_capacity(clusters.len());
    for c in clusters {
        let client = source_client(&c)?;
        let source = ingest::source::choose(&pool, client, &c.ingest.cluster, c.source).await?;
        sources.push(ingest::WorkerCluster { source, ingest: c.ingest });
    }
    let opts = WorkerOptions {
        lateness: a.lateness,
        reprocess_hours: a.reprocess_hours,
        initial_hours: a.initial_hours,
        once: a.once,
        lease: a.lease,
        span,
        name: ingest::worker::worker_name(),
        max_backoff: a.max_backoff,
    };
    tracing::info!(worker = %opts.name, clusters = sources.len(), "worker started");
    let webhook = a.webhook.as_deref();
    let check_budgets = async |from: DateTime<Utc>, to: DateTime<Utc>| match crate::usecase::alerts::check_after_ingest(
        &pool, tz, from, to, webhook,
    )
    .await
    {
        Ok(run) if run.raised + run.delivered + run.failed > 0 => {
            tracing::info!(raised = run.raised, delivered = run.delivered, not_delivered = run.failed, "budget alerts")
        }
        Ok(_) => {}
        Err(e) => tracing::error!(error = %e, "budget check failed; it runs again after the next cycle"),
    };
    // after each cycle's budget check, the close events due (a month closed meanwhile, a retry whose time came)
    let check_budgets = async |from: DateTime<Utc>, to: DateTime<Utc>| {
        check_budgets(from, to).await;
        // bounded, so endpoints that never answer cannot hold up the next cycle (a delivery cut short mid-POST is
        // due again when its lease ends)
        let deliver = crate::usecase::close_events::deliver_due(&pool, Utc::now());
        match tokio::time::timeout(std::time::Duration::from_secs(60), deliver).await {
            Ok(run) => crate::usecase::close_events::log_run(run),
            Err(_) => tracing::warn!("close events: the run's minute is up; the rest are delivered on the next cycle"),
        }
    };
    ingest::run_worker(&pool, &sources, &opts, check_budgets, stop.requested()).await?;
    if stop.is_requested() {
        tracing::info!("worker stopped");
    }
    Ok(())
}
