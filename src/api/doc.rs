//! The OpenAPI document's shared declarations: the error answers every operation lists (so none is forgotten),
//! the conditional answers of the statement representations, and the input rules of [`crate::validate`]
//! written into the document, so the document and the server cannot drift apart.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::{ObjectBuilder, Ref, RefOr, Response, Schema, Type};
use utoipa::{IntoResponses, PartialSchema, ToSchema};

use super::error::ErrorBody;
use crate::validate;

/// The xlsx content type.
pub(super) const XLSX: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";

/// What any operation can answer besides its success: every error is an [`ErrorBody`].
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // documents answers; handlers build them from `ApiError`
pub enum ReaderErrors {
    /// The request cannot be read: a query string or path that does not parse, a body that is not UTF-8.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// No token, or an unknown, expired or revoked one.
    #[response(status = 401, headers(("WWW-Authenticate" = String, description = "`Bearer`")))]
    Unauthorized(ErrorBody),
    /// The caller's role may not do this.
    #[response(status = 403)]
    Forbidden(ErrorBody),
    /// Absent, or outside the caller's teams (a team lead learns nothing of other teams).
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// Well-formed but invalid values; `errors` names every bad field.
    #[response(status = 422)]
    Invalid(ErrorBody),
    /// A fault of the server (details are logged, never sent).
    #[response(status = 500)]
    Internal(ErrorBody),
    /// The request took too long and was cancelled, or the service is overloaded: try again or narrow it.
    #[response(status = 503)]
    Timeout(ErrorBody),
}

/// What a write can answer besides [`ReaderErrors`].
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // documents answers; handlers build them from `ApiError`
pub enum WriterErrors {
    /// It exists already (a duplicate, or a concurrent write won), or the state forbids it (a closed month).
    #[response(status = 409)]
    Conflict(ErrorBody),
    /// The body is larger than the server's limit.
    #[response(status = 413)]
    PayloadTooLarge(ErrorBody),
    /// The body is not of the content type the operation reads.
    #[response(status = 415)]
    UnsupportedMediaType(ErrorBody),
}

/// The 409 of a read: a closed month asked for under another policy than the one it was frozen with.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // documents answers; handlers build them from `ApiError`
pub enum PolicyConflict {
    /// The month is closed under another mode or unallocated policy (`field`: `mode` or `unallocated`).
    #[response(status = 409)]
    Conflict(ErrorBody),
}

/// `Link` of a paged list.
const LINK: &str = "`<…>; rel=\"next\"`: the next page (absent on the last)";

/// The 200 of a cursor-paged list of `T`: a JSON array in a stable order, and the next page in `Link`.
pub struct Paged<T>(std::marker::PhantomData<T>);

impl<T: ToSchema> IntoResponses for Paged<T> {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        let array = utoipa::openapi::schema::ArrayBuilder::new().items(Ref::from_schema_name(T::name())).build();
        let ok = ResponseBuilder::new()
            .description("One page, in the list's stable order; `Link` names the next page")
            .header("Link", string_header(LINK))
            .content("application/json", ContentBuilder::new().schema(Some(array)).build())
            .build();
        BTreeMap::from([("200".to_string(), ok.into())])
    }
}

fn string_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .description(Some(description))
        .build()
}

/// The validators every statement representation carries, on its 200 and its 304.
fn validators(mut r: ResponseBuilder) -> ResponseBuilder {
    r = r.header("ETag", string_header("The sha256 of the body, hex in quotes (strong)"));
    r = r.header(
        "Cache-Control",
        string_header(&format!("A closed month: `{}`; an open one: `{}`", super::etag::CLOSED, super::etag::OPEN)),
    );
    r.header("Vary", string_header("`authorization`: the answer depends on the caller's teams"))
}

/// 200 (`content_type`, `schema`) and 304 of a conditional GET; downloads also name their file.
fn conditional(description: &str, content_type: &str, schema: RefOr<Schema>, download: Option<&str>) -> Answers {
    let mut ok = validators(ResponseBuilder::new().description(description))
        .content(content_type, ContentBuilder::new().schema(Some(schema)).build());
    if let Some(ext) = download {
        ok = ok.header("Content-Disposition", string_header(&format!("attachment; cardhour-<month>[-<team>].{ext}")));
    }
    let not_modified =
        validators(ResponseBuilder::new().description("`If-None-Match` names this answer's `ETag`: no body"));
    BTreeMap::from([("200".to_string(), ok.build().into()), ("304".to_string(), not_modified.build().into())])
}

type Answers = BTreeMap<String, RefOr<Response>>;

fn json_ref<T: ToSchema>() -> RefOr<Schema> {
    Ref::from_schema_name(T::name()).into()
}

/// The month summary's 200 and 304.
pub struct MonthAnswers;
impl IntoResponses for MonthAnswers {
    fn responses() -> Answers {
        conditional("The month summary", "application/json", json_ref::<crate::export::json_view::MonthView>(), None)
    }
}

/// A team statement's 200 and 304.
pub struct TeamStatementAnswers;
impl IntoResponses for TeamStatementAnswers {
    fn responses() -> Answers {
        conditional(
            "The team's statement",
            "application/json",
            json_ref::<crate::export::json_view::TeamStatementView>(),
            None,
        )
    }
}

/// The CSV export's 200 and 304.
pub struct CsvAnswers;
impl IntoResponses for CsvAnswers {
    fn responses() -> Answers {
        conditional("The bill lines (UTF-8 with BOM, RFC 4180)", "text/csv", String::schema(), Some("csv"))
    }
}

/// The PDF export's 200 and 304.
pub struct PdfAnswers;
impl IntoResponses for PdfAnswers {
    fn responses() -> Answers {
        let binary = ObjectBuilder::new().schema_type(Type::String).content_media_type("application/pdf");
        conditional("The statements", "application/pdf", binary.into(), Some("pdf"))
    }
}

/// The xlsx export's 200 and 304.
pub struct XlsxAnswers;
impl IntoResponses for XlsxAnswers {
    fn responses() -> Answers {
        let binary = ObjectBuilder::new().schema_type(Type::String).content_media_type(XLSX);
        conditional("The bills as a workbook: a summary sheet and a sheet per team", XLSX, binary.into(), Some("xlsx"))
    }
}

/// A rule of [`crate::validate`] as JSON Schema keywords.
fn rule(name: &str) -> Option<Value> {
    let text = |max: usize| json!({"pattern": validate::text_pattern(), "minLength": 1, "maxLength": max});
    Some(match name {
        "month" => json!({"pattern": validate::MONTH_PATTERN}),
        "date" => json!({"pattern": validate::DATE_PATTERN}),
        "team" => json!({"pattern": validate::TEAM_ID_PATTERN}),
        "cluster" => json!({"pattern": validate::CLUSTER_PATTERN}),
        "namespace" => {
            json!({"pattern": validate::namespace_pattern(), "minLength": 1, "maxLength": validate::NAMESPACE_MAX})
        }
        "model" => text(validate::MODEL_NAME_MAX),
        // a node's model where blank leaves it unset
        "optional_model" => {
            json!({"pattern": validate::optional_text_pattern(), "maxLength": validate::MODEL_NAME_MAX})
        }
        "name" => text(validate::NAME_MAX),
        // a finance code where blank is none
        "code" => json!({"pattern": validate::optional_text_pattern(), "maxLength": validate::CODE_MAX}),
        "optional_name" => json!({"pattern": validate::optional_text_pattern(), "maxLength": validate::NAME_MAX}),
        "node" => text(validate::NODE_NAME_MAX),
        "reason" => text(crate::ledger::OVERRIDE_REASON_MAX),
        "adjustment_reason" => text(crate::ledger::adjustment::REASON_MAX),
        "adjustment_amount" => json!({"pattern": crate::ledger::adjustment::AMOUNT_PATTERN}),
        "note" => {
            json!({"pattern": validate::optional_text_pattern(), "maxLength": crate::ledger::adjustment::REASON_MAX})
        }
        "top" => json!({"minimum": 1, "maximum": validate::TOP_MAX}),
        "limit" => json!({"minimum": 1, "maximum": validate::PAGE_MAX, "default": validate::PAGE_DEFAULT}),
        "hours" => json!({"minimum": 1, "maximum": validate::IDLE_HOURS_MAX}),
        "share" => json!({"minimum": 0, "maximum": 1}),
        "non_negative" => json!({"minimum": 0}),
        "cursor" => json!({"pattern": super::page::CURSOR_PATTERN, "minLength": 1}),
        "lang" => json!({"enum": crate::export::LANGS}),
        "instant" => json!({"pattern": validate::INSTANT_PATTERN}),
        "mode" => json!({"enum": validate::BILL_MODES}),
        "unallocated" => json!({"enum": validate::UNALLOCATED_POLICIES}),
        "replicas" => json!({"enum": validate::REPLICA_BILLINGS}),
        "rule" => json!({"enum": validate::IDLE_RULES}),
        _ => return None,
    })
}

/// Which rule a parameter follows, by operation path and parameter name.
fn parameter_rule(path: &str, name: &str) -> Option<&'static str> {
    Some(match name {
        "month" => "month",
        "team" => "team",
        "id" if path.starts_with("/api/v1/teams/") => "team",
        "cluster" => "cluster",
        "node" => "node",
        "model" | "model_name" => "model",
        "top" => "top",
        "limit" => "limit",
        "hours" => "hours",
        "from" | "to" | "hour" => "instant",
        "mode" => "mode",
        "unallocated" => "unallocated",
        "replicas" => "replicas",
        "rule" if path.ends_with("/idle") => "rule",
        "max_utilization" => "share",
        "after" => "cursor",
        "lang" => "lang",
        "min_memory_mib" => "non_negative",
        _ => return None,
    })
}

/// Which rule a property of a component schema follows.
fn property_rule(schema: &str, property: &str) -> Option<&'static str> {
    Some(match (schema, property) {
        ("MappingInput", "namespace") | ("QueueMappingInput", "queue") => "namespace",
        ("QueueMappingInput", "team_id") => "team",
        ("QueueMappingInput", "cluster") => "cluster",
        ("QueueMappingInput", "valid_from") | ("ReservationTermInput", "valid_from") => "date",
        ("ReservationTermInput", "cluster") => "cluster",
        ("ReservationTermInput", "scope") => "namespace",
        ("ReservationTermInput", "gpu_model") => "model",
        ("MappingInput", "team_id") => "team",
        ("MappingInput", "cluster") => "cluster",
        ("MappingInput", "valid_from") | ("RateInput", "effective_from") => "date",
        ("RateInput", "gpu_model") | ("AliasInput", "pricing_model") => "model",
        ("NodeSettingsView", "gpu_model") => "optional_model",
        ("TeamInput", "name" | "owner") => "name",
        ("OverrideInput", "reason") => "reason",
        ("AdjustmentInput", "month") => "month",
        ("AdjustmentInput", "team") => "team",
        ("AdjustmentInput", "amount") => "adjustment_amount",
        ("AdjustmentInput", "reason") => "adjustment_reason",
        ("DecisionInput", "note") => "note",
        ("FinanceCodesInput", "valid_from") => "date",
        ("FinanceCodesInput", "cost_centre" | "gl_account") => "code",
        ("FinanceCodesInput", "legal_entity") => "optional_name",
        ("CloseInput", "mode") => "mode",
        ("CloseInput", "unallocated") => "unallocated",
        _ => return None,
    })
}

/// The range a decimal property of a component schema takes (it travels as a string: the range is a pattern).
fn decimal_rule(schema: &str, property: &str) -> Option<validate::DecimalRange> {
    use crate::pricing::tco;
    Some(match (schema, property) {
        ("TcoInputs", "card_price" | "server_share_per_card" | "datacenter_per_card_year" | "staff_per_card_year") => {
            tco::YUAN
        }
        ("TcoInputs", "depreciation_years") => tco::YEARS,
        ("TcoInputs", "avg_power_kw") => tco::POWER_KW,
        ("TcoInputs", "pue" | "system_factor") => tco::FACTOR,
        ("TcoInputs", "electricity_price") => tco::ELECTRICITY_PRICE,
        ("TcoInputs", "recovery_utilization") => tco::SHARE,
        ("CloudRates", _) => crate::pricing::CLOUD_RATE,
        ("RateInput", "rate") => crate::pricing::RATE,
        ("BudgetInput", "amount") => validate::BUDGET_AMOUNT,
        ("BudgetInput", "thresholds") => validate::BUDGET_THRESHOLD,
        ("ReservationTermInput", "factor") => crate::usecase::reservation_terms::FACTOR,
        _ => return None,
    })
}

/// What a property must be that utoipa cannot say of an `Option` the handler refuses when absent.
fn required_properties(schema: &str) -> &'static [&'static str] {
    match schema {
        // closing names its whole policy (the handler answers a missing part with a 422 naming it)
        "CloseInput" => &["mode", "unallocated"],
        _ => &[],
    }
}

/// Merges `keywords` into a schema.
fn apply(schema: &mut Value, keywords: &Value) {
    let Some(target) = schema.as_object_mut() else { return };
    let nullable = target.get("type").and_then(Value::as_array).is_some_and(|t| t.iter().any(|t| t == "null"));
    for (k, v) in keywords.as_object().into_iter().flatten() {
        let mut v = v.clone();
        // an `Option` also takes `null`, which an enum must then list
        if let (true, "enum", Some(values)) = (nullable, k.as_str(), v.as_array_mut()) {
            values.push(Value::Null);
        }
        target.insert(k.clone(), v);
    }
}

/// Writes the validation rules into the document, by parameter and by property of a component schema.
/// On the JSON: utoipa's own types do not read back every keyword they write.
pub fn apply_rules(spec: &utoipa::openapi::OpenApi) -> Value {
    let mut doc = serde_json::to_value(spec).unwrap_or_default();
    if let Some(paths) = doc["paths"].as_object_mut() {
        for (path, item) in paths.iter_mut() {
            for op in item.as_object_mut().into_iter().flat_map(|o| o.values_mut()) {
                // `get_mut`: indexing a missing key would insert a `null`
                for p in op.get_mut("parameters").and_then(Value::as_array_mut).into_iter().flatten() {
                    let name = p["name"].as_str().unwrap_or_default().to_string();
                    if let Some(keywords) = parameter_rule(path, &name).and_then(rule) {
                        apply(&mut p["schema"], &keywords);
                    }
                }
            }
        }
    }
    if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
        for (name, schema) in schemas.iter_mut() {
            for (prop, s) in schema.get_mut("properties").and_then(Value::as_object_mut).into_iter().flatten() {
                if let Some(keywords) = property_rule(name, prop).and_then(rule) {
                    apply(s, &keywords);
                }
                if let Some(range) = decimal_rule(name, prop) {
                    // a list of decimals (the thresholds) takes the range on each item
                    let target = if s.get("items").is_some() { &mut s["items"] } else { s };
                    apply(target, &json!({"pattern": range.pattern()}));
                }
            }
            let required = required_properties(name);
            if !required.is_empty() {
                for prop in required {
                    if let Some(p) = schema["properties"].get_mut(*prop) {
                        not_null(p);
                    }
                }
                schema["required"] = json!(required);
            }
        }
    }
    doc
}

/// Takes `null` out of a property's type and enum.
fn not_null(schema: &mut Value) {
    if let Some(types) = schema.get_mut("type").and_then(Value::as_array_mut) {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            schema["type"] = types[0].clone();
        }
    }
    if let Some(values) = schema.get_mut("enum").and_then(Value::as_array_mut) {
        values.retain(|v| !v.is_null());
    }
}
