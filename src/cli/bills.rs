//! `export`, `readiness`, `close`, `budgets`: a month's files, whether it may close, closing it, its budgets.

use anyhow::{Context, bail};
use chrono::Utc;

use super::{
    BudgetsArgs, CloseArgs, CloseEventsCommand, ExportArgs, ExportFormat, ReadinessArgs, cli_actor, operator,
    policy_choice, resolve_time, services,
};
use crate::access::Scope;
use crate::billing::PolicyChoice;
use crate::usecase::{self, close_events, closing, exports, statements};

pub(super) async fn export_cmd(a: ExportArgs) -> anyhow::Result<()> {
    let sv = services(&a.db, 2).await?;
    // one team's statement is what goes to its lead: no cluster-wide summary then
    let scope = a.team.clone().map_or_else(Scope::all, |t| Scope::teams(vec![t.into_string()]));
    let choice = PolicyChoice { replicas: a.replicas, ..policy_choice(a.mode, a.unallocated) };
    let sel = statements::select(&sv, &scope, a.month, choice, a.team.as_ref()).await?;
    let bytes = match a.format {
        // the whole month (no --team) ends with the cluster rows from layout 2 on, as the API's export does
        ExportFormat::Csv => exports::csv(&sel, None)?,
        ExportFormat::Pdf => {
            // a draft names who ran the export (a closed month's preparer is its close)
            let user = std::env::var("USER").unwrap_or_else(|_| "cli".into());
            exports::pdf(&sv, &sel, format!("cli:{user}"), a.lang).await?
        }
        ExportFormat::Xlsx => exports::xlsx(&sv, &sel, a.lang)?,
    };
    match a.out {
        Some(path) => {
            // written next to the target and renamed: a failed export leaves no half-written file
            let tmp = path.with_extension("partial");
            std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {} ({} bytes)", path.display(), bytes.len());
        }
        None => {
            use std::io::Write;
            std::io::stdout().write_all(&bytes)?;
        }
    }
    Ok(())
}

pub(super) async fn readiness_cmd(a: ReadinessArgs) -> anyhow::Result<()> {
    let sv = services(&a.db, 2).await?;
    let r = closing::readiness(&sv, &Scope::all(), a.month).await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else if r.ready {
        println!("{}: ready to close", a.month);
    } else {
        println!("{}: not ready to close ({} blocker(s))", a.month, r.blockers.len());
        for b in &r.blockers {
            println!("  - {b}");
        }
    }
    if !r.ready {
        std::process::exit(1);
    }
    Ok(())
}

pub(super) async fn close_cmd(a: CloseArgs) -> anyhow::Result<()> {
    // finance names the policy it freezes; a configured default decided by someone else earlier is not enough
    let Some(policy) = policy_choice(a.mode, a.unallocated).complete() else {
        bail!(
            "closing freezes a bill policy: give --mode (showback or chargeback) and --unallocated \
             (kept-by-platform or spread-proportionally); see the draft first with `cardhour export --month {} \
             --mode … --unallocated …`",
            a.month
        );
    };
    let sv = services(&a.db, 4).await?;
    match closing::close(&sv, a.month, policy, a.override_reason, &operator(cli_actor()).writer()).await {
        Ok(st) => {
            println!(
                "closed {} (content hash {}){}",
                a.month,
                st.content_hash.as_deref().unwrap_or("?"),
                if st.close_override.is_some() { ", incomplete, by override" } else { "" }
            );
            // the close event, once now; what is not acknowledged is retried by the worker, `serve` or
            // `cardhour close-events deliver`
            // the month is closed whatever happens here: a failure is reported, never the close's exit status
            match close_events::deliver_due(&sv.pool, Utc::now()).await {
                Ok(run) => {
                    println!("close event: {} delivered, {} not delivered (retried later)", run.delivered, run.failed)
                }
                Err(e) => eprintln!(
                    "close event not delivered now ({e}); the worker, `serve` or `cardhour \
                     close-events deliver` retries it"
                ),
            }
            Ok(())
        }
        Err(usecase::Error::NotReady(r)) => {
            eprintln!("{} is not ready to close ({} blocker(s)):", a.month, r.blockers.len());
            for b in &r.blockers {
                eprintln!("  - {b}");
            }
            bail!("not closed: complete the month (ingest the hours, set the rates) or give --override REASON")
        }
        Err(e) => Err(e.into()),
    }
}

pub(super) async fn budgets_cmd(a: BudgetsArgs) -> anyhow::Result<()> {
    // one connection holds the turn at alerting (alerts::check_budgets) while the others read
    let sv = services(&a.db, 4).await?;
    let at = match a.at {
        Some(t) => resolve_time("--at", t, sv.billing_tz)?,
        None => Utc::now(),
    };
    let month = a.month.unwrap_or_else(|| crate::billing::Month::containing(at, sv.billing_tz));
    let run = usecase::budgets::check(&sv, month, at, a.webhook.as_deref()).await?;
    println!("{month}: {} new alerts, {} delivered, {} not delivered", run.raised, run.delivered, run.failed);
    if run.failed > 0 {
        bail!("{} alerts could not be delivered; they are retried on the next run", run.failed);
    }
    Ok(())
}

pub(super) async fn close_events_cmd(c: CloseEventsCommand) -> anyhow::Result<()> {
    match c {
        CloseEventsCommand::Deliver(a) => {
            let pool = a.db.connect(2).await.context("cannot connect to the database")?;
            let run = close_events::deliver_due(&pool, Utc::now()).await?;
            println!("close events: {} delivered, {} not delivered (retried later)", run.delivered, run.failed);
            if run.failed > 0 {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}
