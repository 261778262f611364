//! `/bills`: month statements per team (lines, rates, restatements, totals), the month summary, and closing a
//! month (finance). A team lead sees its own teams' statements only; others are 404.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{
    CsvAnswers, MonthAnswers, PdfAnswers, PolicyConflict, ReaderErrors, TeamStatementAnswers, WriterErrors, XLSX,
    XlsxAnswers,
};
use super::error::ApiError;
use super::{ApiPath, ApiQuery, AppState, etag};
use crate::access::Scope;
use crate::api::bearer::{Finance, GlobalReader, Reader, ScopedReader};
use crate::billing::{BillPolicy, Month, PolicyChoice};
use crate::export::json_view::{MonthView, month_view, team_statement_json};
use crate::ledger::readiness::Readiness;
use crate::ledger::{MonthStatus, Statement};
use crate::usecase::closing;
use crate::usecase::exports;
use crate::usecase::statements::{self, Selection};
use crate::validate::TeamId;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_month))
        .routes(routes!(get_team_statement))
        .routes(routes!(close_month))
        .routes(routes!(month_readiness))
        .routes(routes!(export_csv))
        .routes(routes!(export_pdf))
        .routes(routes!(export_xlsx))
}

/// The bill policy to show an open month under (a draft: what is left out is the configured default). A closed
/// month exists under the policy it was closed with only: naming that one is the same answer, naming another is a
/// 409 naming the field.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams, utoipa::ToSchema)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PolicyInput {
    /// `showback` or `chargeback`.
    pub mode: Option<String>,
    /// `kept_by_platform` or `spread_proportionally`.
    pub unallocated: Option<String>,
    /// Open month: a draft with every time-sliced replica billed so, `fraction` or `whole_card` (default: each
    /// cluster's or node pool's dated setting). A closed month was billed per the settings of its time (any
    /// value is a 409).
    pub replicas: Option<String>,
}

impl PolicyInput {
    fn resolve(&self) -> Result<PolicyChoice, ApiError> {
        Ok(crate::validate::policy_choice(self.mode.as_deref(), self.unallocated.as_deref(), self.replicas.as_deref())?)
    }
}

/// A statement's JSON view as a conditional answer (its ETag, 304, caching by the month's status).
fn json_answer(request: &HeaderMap, st: &Statement, view: &impl Serialize) -> Result<Response, ApiError> {
    let body = serde_json::to_vec(view).map_err(|e| ApiError::Internal(e.into()))?;
    json_bytes(request, st, body)
}

fn json_bytes(request: &HeaderMap, st: &Statement, body: Vec<u8>) -> Result<Response, ApiError> {
    let json = HeaderValue::from_static("application/json");
    Ok(etag::respond(request, st.status == MonthStatus::Closed, json, &[], body))
}

/// The month summary: every team's totals (a team lead: its own), capacity cost and the unallocated part.
/// Conditional: `ETag` is the sha256 of the body; `If-None-Match` naming it is a 304.
#[utoipa::path(get, path = "/bills/{month}", tag = "bills", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM in the billing time zone"), PolicyInput, IfNoneMatch),
    responses(MonthAnswers, ReaderErrors, PolicyConflict))]
async fn get_month(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiPath(month): ApiPath<Month>,
    ApiQuery(policy): ApiQuery<PolicyInput>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let st = statements::statement(&s.cases, month, policy.resolve()?).await?;
    json_answer(&headers, &st, &month_view(&st, &scope))
}

/// `If-None-Match` of a conditional GET.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // documents the header; the handlers read it from the request's headers
struct IfNoneMatch {
    /// ETags of earlier answers (or `*`): a 304 without a body when one is this answer's.
    #[param(rename = "If-None-Match")]
    if_none_match: Option<String>,
}

/// A team's statement: every line with its rate and amount, restatements, totals. Conditional (`ETag`, 304).
#[utoipa::path(get, path = "/bills/{month}/teams/{team}", tag = "bills", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM"), ("team" = String, Path, description = "team id"),
        PolicyInput, IfNoneMatch),
    responses(TeamStatementAnswers, ReaderErrors, PolicyConflict))]
async fn get_team_statement(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiPath((month, team)): ApiPath<(Month, TeamId)>,
    ApiQuery(policy): ApiQuery<PolicyInput>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let sel = statements::select(&s.cases, &scope, month, policy.resolve()?, Some(&team)).await?;
    // the close event's content hash is of these bytes (one function makes them for both)
    let body = team_statement_json(&sel.statement, team.as_str()).map_err(|e| ApiError::Internal(e.into()))?;
    json_bytes(&headers, &sel.statement, body)
}

/// What closing a month takes: the policy it is frozen with, both parts named (no default: finance decides it at
/// the close) and, for a month that is not complete, an override with its reason.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CloseInput {
    /// `showback` or `chargeback` (required).
    pub mode: Option<String>,
    /// `kept_by_platform` or `spread_proportionally` (required).
    pub unallocated: Option<String>,
    /// Close although the readiness lists blockers; the reason goes into the audit log and onto the statement.
    #[serde(rename = "override")]
    pub override_: Option<OverrideInput>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OverrideInput {
    /// Why the month is closed incomplete (at most 2000 characters).
    pub reason: String,
}

/// The answer to a close: the statement as frozen, and the content hash of what was frozen.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ClosedView {
    #[serde(flatten)]
    pub statement: MonthView,
    /// sha256 hex of the frozen snapshot, as the database stored it at the close (`closed_months.content_hash`);
    /// every later read of the month is checked against it.
    pub snapshot_hash: String,
}

/// The policy a close freezes: both parts, named. An empty body or one naming neither is a 422 on `policy`; one
/// naming a single part, a 422 on the other.
fn close_policy(input: &CloseInput) -> Result<BillPolicy, ApiError> {
    let choice =
        PolicyInput { mode: input.mode.clone(), unallocated: input.unallocated.clone(), replicas: None }.resolve()?;
    choice.complete().ok_or_else(|| match (choice.mode, choice.unallocated) {
        (None, None) => ApiError::invalid(
            "policy",
            "closing freezes a bill policy: give `mode` (showback or chargeback) and `unallocated` \
             (kept_by_platform or spread_proportionally)",
        ),
        (None, _) => ApiError::invalid("mode", "required to close: showback or chargeback"),
        _ => ApiError::invalid("unallocated", "required to close: kept_by_platform or spread_proportionally"),
    })
}

/// Closes an ended month (finance, admin) under the policy the body names (both `mode` and `unallocated`; there is
/// no default): its statements become immutable; later changes to its usage or rates appear as restatement lines
/// on the next open month. Look at the draft first: every statement and export of an open month takes `mode` and
/// `unallocated`. A month that is not complete (see `readiness`) is refused with 409 and its blockers, unless the
/// body carries `override.reason`. Answers with the statement as frozen and its `snapshot_hash`. Audited.
#[utoipa::path(post, path = "/bills/{month}/close", tag = "bills", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM")), request_body = CloseInput,
    responses((status = 201, description = "The month is closed; its statement as frozen and the hash the database stored", body = ClosedView), ReaderErrors, WriterErrors))]
async fn close_month(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiPath(month): ApiPath<Month>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<ClosedView>), ApiError> {
    let input: CloseInput = if body.iter().all(u8::is_ascii_whitespace) {
        CloseInput::default()
    } else {
        // axum's decoder names the JSON path of a bad value (`mode`), serde_json's does not
        axum::Json::<CloseInput>::from_bytes(&body).map_err(ApiError::from)?.0
    };
    let policy = close_policy(&input)?;
    let override_reason = input.override_.map(|o| o.reason);
    let st = closing::close(&s.cases, month, policy, override_reason, &writer).await?;
    // the close event: delivered now in the background, retried by the worker, `serve` or the CLI
    crate::usecase::close_events::deliver_soon(s.cases.pool.clone());
    let snapshot_hash = st
        .content_hash
        .clone()
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("month {month} closed without a content hash")))?;
    Ok((
        StatusCode::CREATED,
        Json(ClosedView { statement: month_view(&st, &writer.principal().scope()), snapshot_hash }),
    ))
}

/// What stands in the way of closing a month (global readers): hours not ingested, failed windows, watermarks
/// short of the month's end, unknown or unpriced GPU models, nodes whose cards were not counted, hours kept over a
/// smaller read. `ready` is true when there is none.
#[utoipa::path(get, path = "/bills/{month}/readiness", tag = "bills", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM")),
    responses((status = 200, description = "The month's readiness to close", body = Readiness), ReaderErrors))]
async fn month_readiness(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
    ApiPath(month): ApiPath<Month>,
) -> Result<Json<Readiness>, ApiError> {
    Ok(Json(closing::readiness(&s.cases, &reader.scope(), month).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ExportQuery {
    /// Only this team (default: every team the caller may see). An unknown team is a 404 naming `team`; a known
    /// team without lines this month is an export without lines.
    #[param(value_type = Option<String>)]
    pub team: Option<TeamId>,
    /// Open month: the draft under this bill mode, `showback` or `chargeback` (default: the configured one).
    /// Closed month: only the mode it was closed with (another is a 409).
    pub mode: Option<String>,
    /// Open month: the draft under this unallocated policy, `kept_by_platform` or `spread_proportionally`
    /// (default: the configured one). Closed month: only the one it was closed with (another is a 409).
    pub unallocated: Option<String>,
    /// Open month: the draft with every time-sliced replica billed so, `fraction` or `whole_card` (default: the
    /// dated settings). Closed month: any value is a 409.
    pub replicas: Option<String>,
    /// Layout 4 on. CSV: the header and the words (status, line types, kinds, policy, yes/no) in `zh` or `en`
    /// (default: the field names and codes, for programs). Workbook: its language, `zh` (default) or `en`. A month
    /// closed under an earlier layout is written as it was, whatever this says.
    pub lang: Option<String>,
}

/// `?lang=`: exactly `zh` or `en`, else a 422 naming `lang`.
fn parse_lang(lang: Option<&str>) -> Result<Option<crate::export::Lang>, ApiError> {
    lang.map(|l| {
        crate::export::Lang::from_code(l)
            .ok_or_else(|| ApiError::invalid("lang", format!("`{}`: use zh or en", l.escape_debug())))
    })
    .transpose()
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PdfQuery {
    /// Only this team (default: every team the caller may see). An unknown team is a 404 naming `team`; a known
    /// team without lines this month gets its empty statement.
    #[param(value_type = Option<String>)]
    pub team: Option<TeamId>,
    /// As for the other exports: an open month's draft under this bill mode; a closed month only its own.
    pub mode: Option<String>,
    /// As for the other exports: an open month's draft under this unallocated policy; a closed month only its own.
    pub unallocated: Option<String>,
    /// As for the other exports: an open month's draft with time-sliced replicas billed so.
    pub replicas: Option<String>,
    /// The statement's language from layout 3 on: `zh` (zh-CN, the default) or `en`. A month closed under
    /// layout 1 or 2 prints as it did then, in English, whatever this says.
    pub lang: Option<String>,
}

/// What every export starts from: the month's statement under the policy asked for, and the teams of it the
/// caller gets (its scope, narrowed to `team` when asked: an unknown team, or one outside the scope, is a 404).
async fn export_selection(s: &AppState, scope: &Scope, month: Month, q: &ExportQuery) -> Result<Selection, ApiError> {
    let choice = crate::validate::policy_choice(q.mode.as_deref(), q.unallocated.as_deref(), q.replicas.as_deref())?;
    Ok(statements::select(&s.cases, scope, month, choice, q.team.as_ref()).await?)
}

/// The header of [`exports::content_disposition`] (the pages' downloads name their files the same way).
fn content_disposition(name: &str) -> axum::http::HeaderValue {
    axum::http::HeaderValue::from_str(&exports::content_disposition(name))
        .unwrap_or_else(|_| axum::http::HeaderValue::from_static("attachment"))
}

/// A download of `st` as a conditional answer: its content type, a file name `cardhour-<month>[-<team>].<ext>`,
/// its ETag (304 when `If-None-Match` names it) and caching by the month's status.
fn attachment(
    request: &HeaderMap,
    st: &Statement,
    content_type: &'static str,
    team: Option<&str>,
    ext: &str,
    body: Vec<u8>,
) -> Response {
    let name = exports::file_name(st, team, ext);
    let disposition = [(axum::http::header::CONTENT_DISPOSITION, content_disposition(&name))];
    let closed = st.status == MonthStatus::Closed;
    etag::respond(request, closed, HeaderValue::from_static(content_type), &disposition, body)
}

/// The month's bill lines as CSV (UTF-8 with BOM, RFC 4180): usage lines, unallocated shares, restatements — of
/// the caller's teams only for a team lead. From layout 2 on, months are written `="YYYY-MM"` (a spreadsheet keeps
/// them text) and an export of every team ends with the cluster rows (`capacity`, `unallocated`,
/// `platform_kept`): Σ usage + Σ unallocated_share + platform_kept = Σ capacity. Conditional (`ETag`, 304).
#[utoipa::path(get, path = "/exports/{month}/bills.csv", tag = "bills", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM"), ExportQuery, IfNoneMatch),
    responses(CsvAnswers, ReaderErrors, PolicyConflict))]
async fn export_csv(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiPath(month): ApiPath<Month>,
    ApiQuery(q): ApiQuery<ExportQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let words = parse_lang(q.lang.as_deref())?;
    let sel = export_selection(&s, &scope, month, &q).await?;
    let body = exports::csv(&sel, words)?;
    Ok(attachment(
        &headers,
        &sel.statement,
        "text/csv; charset=utf-8",
        q.team.as_ref().map(TeamId::as_str),
        "csv",
        body,
    ))
}

/// The month's statements as PDF: for global readers a finance summary with a chart, then one statement per team;
/// a team lead gets its own teams' statements only, without any cluster-wide figure. Chinese names are set in an
/// embedded subset of Noto Sans CJK. A month closed under layout 2 or later prints the idle pods and utilization its
/// close froze; an open month (and one closed under layout 1) those computed now. From layout 3 on (months closed
/// now, and open months) the statement is in `lang` (zh-CN by default), with ¥ amounts, the data coverage, budget
/// vs actual, the previous month, prepared-by and an approval block; an open month's pages say 草稿 / DRAFT, and
/// name the caller as the preparer. Conditional (`ETag`, 304).
#[utoipa::path(get, path = "/exports/{month}/statements.pdf", tag = "bills", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM"), PdfQuery, IfNoneMatch),
    responses(PdfAnswers, ReaderErrors, PolicyConflict))]
async fn export_pdf(
    State(s): State<AppState>,
    Reader(reader): Reader,
    ApiPath(month): ApiPath<Month>,
    ApiQuery(q): ApiQuery<PdfQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let lang = parse_lang(q.lang.as_deref())?.unwrap_or_default();
    let scope = reader.scope();
    let export = ExportQuery {
        team: q.team.clone(),
        mode: q.mode.clone(),
        unallocated: q.unallocated.clone(),
        replicas: q.replicas.clone(),
        lang: None,
    };
    let sel = export_selection(&s, &scope, month, &export).await?;
    let body = exports::pdf(&s.cases, &sel, reader.name.clone(), lang).await?;
    Ok(attachment(&headers, &sel.statement, "application/pdf", q.team.as_ref().map(TeamId::as_str), "pdf", body))
}

/// The month's statements as an Excel workbook: a summary sheet (`汇总 Summary`: the policy, every team's totals
/// and — for a global reader exporting every team — the capacity lines and the reconciliation allocated +
/// unallocated + not offered = capacity cost, to the fen), then a sheet per team with its lines (usage, unallocated
/// share, restatements) and its total. Numbers are number cells (money 2 decimals, card-hours 3, rates 4), months
/// date cells shown `yyyy-mm`; headers in Chinese with the English field name in the row below. A team lead gets
/// its own teams only. A closed month's workbook is built from its frozen snapshot alone. Conditional (`ETag`,
/// 304): the document properties are fixed, so equal statements give equal bytes.
#[utoipa::path(get, path = "/exports/{month}/bills.xlsx", tag = "bills", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM"), ExportQuery, IfNoneMatch),
    responses(XlsxAnswers, ReaderErrors, PolicyConflict))]
async fn export_xlsx(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiPath(month): ApiPath<Month>,
    ApiQuery(q): ApiQuery<ExportQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let lang = parse_lang(q.lang.as_deref())?.unwrap_or_default();
    let sel = export_selection(&s, &scope, month, &q).await?;
    let body = exports::xlsx(&s.cases, &sel, lang)?;
    Ok(attachment(&headers, &sel.statement, XLSX, q.team.as_ref().map(TeamId::as_str), "xlsx", body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_disposition_cannot_be_injected() {
        let v = content_disposition("cardhour-2026-10-a\";filename=\"evil.exe.csv");
        let v = v.to_str().unwrap();
        assert_eq!(
            v,
            "attachment; filename=\"cardhour-2026-10-a__filename__evil.exe.csv\"; \
             filename*=UTF-8''cardhour-2026-10-a%22%3Bfilename%3D%22evil.exe.csv"
        );
        assert_eq!(v.matches("filename=").count(), 1);
        let v = content_disposition("cardhour-2026-10-视觉\r\n.pdf");
        assert_eq!(
            v.to_str().unwrap(),
            "attachment; filename=\"cardhour-2026-10-____.pdf\"; \
             filename*=UTF-8''cardhour-2026-10-%E8%A7%86%E8%A7%89%0D%0A.pdf"
        );
    }

    /// `?team=` of an export as the query extractor reads it (it ends up in a header: only a team id passes).
    fn export_team(team: Option<&str>) -> Result<Option<TeamId>, ApiError> {
        let query = team.map_or_else(String::new, |t| {
            format!("?team={}", url::form_urlencoded::byte_serialize(t.as_bytes()).collect::<String>())
        });
        let uri: axum::http::Uri = format!("/exports/2026-11/bills.csv{query}").parse().unwrap();
        Ok(axum::extract::Query::<ExportQuery>::try_from_uri(&uri)?.0.team)
    }

    #[test]
    fn export_teams_must_be_team_ids() {
        for ok in ["vision", "nlp-2", "a.b_c"] {
            assert_eq!(export_team(Some(ok)).unwrap().unwrap().as_str(), ok);
        }
        assert!(export_team(None).unwrap().is_none());
        for bad in ["a\";filename=\"evil.exe", "a\r\nx: y", "", "Vision", "视觉", &"a".repeat(64)] {
            let err = export_team(Some(bad)).unwrap_err();
            assert_eq!(err.status(), StatusCode::UNPROCESSABLE_ENTITY, "{bad:?}");
            assert!(matches!(&err, ApiError::Invalid(f) if f[0].field == "team"), "{bad:?}");
        }
    }
}
