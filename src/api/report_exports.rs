//! `/exports/…` of the reports and the idle list: the idle list, the low-utilization top N, a month's utilization
//! and efficiency tiers, oversubscription — as CSV (field names and codes, or `?lang=` words) and as Excel
//! workbooks (in `?lang=`, zh-CN by default), the same figures as their JSON (one use case computes both).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::ReaderErrors;
use super::error::ApiError;
use super::{ApiPath, ApiQuery, AppState};
use crate::api::bearer::{GlobalReader, ScopedReader};
use crate::billing::Month;
use crate::glossary::Lang;
use crate::usecase::idle::IdleAsk;
use crate::usecase::report_exports::{self, Format, ReportFile};
use crate::usecase::reports;
use crate::validate;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(idle_export))
        .routes(routes!(range_report_export))
        .routes(routes!(month_report_export))
        .routes(routes!(unit_cost_export))
}

/// `csv` or `xlsx` from a path's file name (`idle.csv`), else a 404 naming the route.
fn format_of(file: &str, stem: &str) -> Result<Format, ApiError> {
    match file.strip_prefix(stem) {
        Some(".csv") => Ok(Format::Csv),
        Some(".xlsx") => Ok(Format::Xlsx),
        _ => Err(ApiError::NotFound(format!("export {file} (use {stem}.csv or {stem}.xlsx)"))),
    }
}

/// `?lang=`: `zh` or `en`, else a 422 naming `lang`.
fn lang_of(lang: Option<&str>) -> Result<Option<Lang>, ApiError> {
    lang.map(|l| {
        Lang::from_code(l).ok_or_else(|| ApiError::invalid("lang", format!("`{}`: use zh or en", l.escape_debug())))
    })
    .transpose()
}

/// 200: the file, as CSV (UTF-8 with BOM, RFC 4180) or as an Excel workbook, named by `Content-Disposition`.
pub struct ReportFileAnswers;

impl utoipa::IntoResponses for ReportFileAnswers {
    fn responses() -> std::collections::BTreeMap<String, utoipa::openapi::RefOr<utoipa::openapi::response::Response>> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        use utoipa::openapi::{ContentBuilder, ResponseBuilder};
        let text = ObjectBuilder::new().schema_type(Type::String);
        let binary = ObjectBuilder::new().schema_type(Type::String).content_media_type(Format::Xlsx.content_type());
        let ok = ResponseBuilder::new()
            .description("The report: CSV (`.csv`) or an Excel workbook (`.xlsx`), as the file name asks")
            .content("text/csv", ContentBuilder::new().schema(Some(text)).build())
            .content(Format::Xlsx.content_type(), ContentBuilder::new().schema(Some(binary)).build())
            .build();
        std::collections::BTreeMap::from([("200".to_string(), ok.into())])
    }
}

/// The file as a download (never cached: reports move with the data).
fn download(f: ReportFile) -> Response {
    let disposition = crate::usecase::exports::content_disposition(&f.name);
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(f.format.content_type()));
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    (headers, f.bytes).into_response()
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct IdleExportQuery {
    /// `weekly` (7 days, < 10 %, default) or `short_term` (2 hours, < 15 %).
    pub rule: Option<String>,
    /// Window end, a whole hour (default: the current hour): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = Option<String>)]
    pub to: Option<validate::TimeInput>,
    /// Window length in hours (1–2160; default from the rule).
    pub hours: Option<u32>,
    /// Utilization threshold, 0–1 (default from the rule).
    pub max_utilization: Option<f64>,
    /// Memory a pod must hold to count, MiB (default 1024).
    pub min_memory_mib: Option<f64>,
    /// Also list pods that no longer hold cards at the window's end.
    pub include_ended: Option<bool>,
    /// CSV: header and words in `zh` or `en` (default: field names and codes). Workbook: its language (default zh).
    pub lang: Option<String>,
}

/// The idle-waste list as a file (`idle.csv`, `idle.xlsx`), within the caller's scope: its window on every row,
/// each pod's money spent idle in the window (what ranks and totals the list) and, for pods still running, the
/// monthly projection (a projection, labelled so); a total row sums both. Times in the billing time zone.
#[utoipa::path(get, path = "/exports/{file}", tag = "waste", security(("bearer" = [])),
    params(("file" = String, Path, description = "`idle.csv` or `idle.xlsx`"), IdleExportQuery),
    responses(ReportFileAnswers, ReaderErrors))]
async fn idle_export(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    Path(file): Path<String>,
    ApiQuery(q): ApiQuery<IdleExportQuery>,
) -> Result<Response, ApiError> {
    let format = format_of(&file, "idle")?;
    let words = lang_of(q.lang.as_deref())?;
    let ask = IdleAsk {
        rule: q.rule,
        to: q.to,
        hours: q.hours,
        max_utilization: q.max_utilization,
        min_memory_mib: q.min_memory_mib,
        include_ended: q.include_ended,
    };
    Ok(download(report_exports::idle_file(&s.cases, &scope, &ask, format, words, Utc::now()).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RangeExportQuery {
    /// Range start (default: 7 days before `to`): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = Option<String>)]
    pub from: Option<validate::TimeInput>,
    /// Range end (default: the current hour): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = Option<String>)]
    pub to: Option<validate::TimeInput>,
    /// Low utilization: how many pods (1–500, default 10).
    pub top: Option<i64>,
    /// Oversubscription: only this cluster (default: all).
    #[param(value_type = Option<String>)]
    pub cluster: Option<validate::ClusterName>,
    /// CSV: header and words in `zh` or `en` (default: field names and codes). Workbook: its language (default zh).
    pub lang: Option<String>,
}

/// A report of a range as a file. `low-utilization.csv` / `.xlsx`: the low-utilization top N within the caller's
/// scope — per pod its GPU-hours, wasted GPU-hours and their money (the idle list's figure for the same pod and
/// window) and at a month's pace (a projection); a total row. `oversubscription.csv` / `.xlsx` (global readers):
/// promised over physical cards per cluster, GPU model and node per day, with the same cards' utilization.
#[utoipa::path(get, path = "/exports/reports/{file}", tag = "reports", security(("bearer" = [])),
    params(("file" = String, Path, description = "`low-utilization.csv`/`.xlsx` or `oversubscription.csv`/`.xlsx`"), RangeExportQuery),
    responses(ReportFileAnswers, ReaderErrors))]
async fn range_report_export(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    Path(file): Path<String>,
    ApiQuery(q): ApiQuery<RangeExportQuery>,
) -> Result<Response, ApiError> {
    let words = lang_of(q.lang.as_deref())?;
    if file.starts_with("oversubscription.") {
        // a cluster-wide report: global readers only (the use case refuses a team lead too)
        let format = format_of(&file, "oversubscription")?;
        let range = reports::oversubscription_range(q.from, q.to, s.billing_tz, Utc::now())?;
        let f = report_exports::oversubscription_file(&s.cases, &scope, range, q.cluster.as_ref(), format, words);
        return Ok(download(f.await?));
    }
    let format = format_of(&file, "low-utilization")?;
    if q.cluster.is_some() {
        return Err(ApiError::invalid("cluster", "only the oversubscription report takes a cluster"));
    }
    let range = reports::low_utilization_range(q.from, q.to, q.top, s.billing_tz, Utc::now())?;
    Ok(download(report_exports::low_utilization_file(&s.cases, &scope, range, format, words).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct MonthExportQuery {
    /// CSV: header and words in `zh` or `en` (default: field names and codes). Workbook: its language (default zh).
    pub lang: Option<String>,
}

/// A month's report as a file (global readers). `utilization.csv` / `.xlsx`: per billing day capacity, GPU-hours,
/// allocation rate, utilization and effective rate, the month's row as total (the workbook adds a sheet per
/// team). `tiers.csv` / `.xlsx`: rank, GPU-hours, utilization, efficiency tier (≥ 70 % golden, 50–70 % silver,
/// < 50 % bronze) and cost per team, `unassigned` without rank or tier, a total row.
#[utoipa::path(get, path = "/exports/{month}/{file}", tag = "reports", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM"), ("file" = String, Path, description = "`utilization.csv`, `utilization.xlsx`, `tiers.csv` or `tiers.xlsx`"), MonthExportQuery),
    responses(ReportFileAnswers, ReaderErrors))]
async fn month_report_export(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
    ApiPath((month, file)): ApiPath<(Month, String)>,
    ApiQuery(q): ApiQuery<MonthExportQuery>,
) -> Result<Response, ApiError> {
    let words = lang_of(q.lang.as_deref())?;
    let scope = reader.scope();
    let f = if file.starts_with("tiers.") {
        report_exports::tiers_file(&s.cases, &scope, month, format_of(&file, "tiers")?, words).await?
    } else {
        report_exports::utilization_file(&s.cases, &scope, month, format_of(&file, "utilization")?, words).await?
    };
    Ok(download(f))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UnitCostExportQuery {
    /// First billing day (YYYY-MM-DD, default: the first day of the current month in the billing time zone).
    #[param(value_type = Option<String>, format = Date)]
    pub from: Option<chrono::NaiveDate>,
    /// The billing day after the last (YYYY-MM-DD, exclusive; default: tomorrow); at most 366 days after `from`.
    #[param(value_type = Option<String>, format = Date)]
    pub to: Option<chrono::NaiveDate>,
    /// team, namespace, model (default), engine, day or month.
    pub group_by: Option<crate::billing::UnitGroup>,
    /// CSV: header and words in `zh` or `en` (default: field names and codes). Workbook: its language (default zh).
    pub lang: Option<String>,
}

/// The unit-cost report as a file (`unit-cost.csv`, `unit-cost.xlsx`), within the caller's scope: per group its
/// tokens, requests, serving cost and ¥ per million tokens / per thousand requests (4 decimals), idle serving cost
/// apart, a total row — the figures of `GET /reports/unit-cost`.
#[utoipa::path(get, path = "/exports/unit-cost/{file}", tag = "reports", security(("bearer" = [])),
    params(("file" = String, Path, description = "`unit-cost.csv` or `unit-cost.xlsx`"), UnitCostExportQuery),
    responses(ReportFileAnswers, ReaderErrors))]
async fn unit_cost_export(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    Path(file): Path<String>,
    ApiQuery(q): ApiQuery<UnitCostExportQuery>,
) -> Result<Response, ApiError> {
    let words = lang_of(q.lang.as_deref())?;
    let format = format_of(&file, "unit-cost")?;
    let range = crate::usecase::unit_cost::range(q.from, q.to, s.billing_tz, Utc::now())?;
    let group = q.group_by.unwrap_or_default();
    Ok(download(report_exports::unit_cost_file(&s.cases, &scope, range, group, format, words).await?))
}
