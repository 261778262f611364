//! The one validation layer for what callers type — text, identifiers, dates, months and ranges — shared by the
//! API (bodies, paths, queries) and the command line. Each check returns the typed value or an [`Invalid`]
//! naming the field, so nothing unchecked reaches the database.

use std::fmt;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, Utc};

use crate::billing::{BillMode, PolicyChoice, UnallocatedPolicy};

pub mod decimal;
pub mod duration;
mod field;
pub mod form;
pub mod mapping_file;
pub mod queue_mapping_file;

pub use field::{FieldError, Problem};

/// The first and last day any stored date may be: data outside them is a typo, and Postgres refuses some of it.
pub const FIRST_DATE: NaiveDate = NaiveDate::from_ymd_opt(2000, 1, 1).expect("valid date");
pub const LAST_DATE: NaiveDate = NaiveDate::from_ymd_opt(2100, 12, 31).expect("valid date");

/// A range over more days than this is refused (no request may hold the database for minutes).
pub const MAX_RANGE_DAYS: i64 = 3 * 366;
/// A per-pod answer (one row per pod) over more days than this is refused.
pub const MAX_POD_RANGE_DAYS: i64 = 92;

// The checks below as JSON Schema patterns and bounds, which `api::doc` writes into the OpenAPI document: each
// pattern accepts what its check accepts (the tests hold the two side by side), so document and server agree.

/// A billing month ([`crate::billing::Month::parse`]): 2000-01 ..= 2100-12.
pub const MONTH_PATTERN: &str = r"^(20[0-9]{2}|2100)-(0[1-9]|1[0-2])$";
/// The shape of a date [`parse_date`] reads, years within [`FIRST_DATE`] ..= [`LAST_DATE`] (with `format: date`).
pub const DATE_PATTERN: &str = r"^(20[0-9]{2}|2100)-[0-9]{2}-[0-9]{2}$";
/// A team id ([`TeamId::parse`]).
pub const TEAM_ID_PATTERN: &str = r"^[a-z0-9][a-z0-9_.-]{0,62}$";
/// A cluster name ([`cluster`]).
pub const CLUSTER_PATTERN: &str = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$";
/// The characters [`text`] refuses, as the inside of a regex character class (see `forbidden`).
const FORBIDDEN_CLASS: &str =
    r"\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff";
/// Free text ([`text`]): none of the forbidden characters, not blank. Its length is `maxLength`.
pub fn text_pattern() -> String {
    format!("^[^{FORBIDDEN_CLASS}]*[^{FORBIDDEN_CLASS}\\s][^{FORBIDDEN_CLASS}]*$")
}
/// Optional text: blank (not set) or [`text_pattern`]'s text: no forbidden character anywhere.
pub fn optional_text_pattern() -> String {
    format!("^[^{FORBIDDEN_CLASS}]*$")
}
/// A namespace ([`namespace`]): no forbidden character and no whitespace.
pub fn namespace_pattern() -> String {
    format!("^[^{FORBIDDEN_CLASS}\\s]+$")
}
/// A calendar date of [`FIRST_DATE`] ..= [`LAST_DATE`]: the months' lengths and the leap days spelled out, so
/// that whatever the pattern accepts is a day.
macro_rules! calendar_date {
    () => {
        concat!(
            r"(?:(?:20[0-9]{2}|2100)-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-",
            r"(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|20(?:[02468][048]|[13579][26])-02-29)"
        )
    };
}
/// What [`TimeInput::parse`] reads (see [`TIME_FORMATS`]): a date, or a date and a time of day (`T`, `t` or one
/// space between), minutes, optional seconds with up to 9 decimals, and an optional offset (`Z`, `±HH:MM`,
/// `±HHMM`). The parser checks it first, so the document's pattern is the rule.
pub const INSTANT_PATTERN: &str = concat!(
    "^",
    calendar_date!(),
    r"(?:[Tt ](?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,9})?)?",
    r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):?[0-5][0-9])?)?$"
);
static INSTANT_RE: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(INSTANT_PATTERN).expect("a valid pattern"));
pub use decimal::{DECIMAL_PATTERN, DecimalRange};
/// A team's budget for a month, yuan to the fen (at most 2 decimals: more are refused, never rounded away); and
/// the shares of it that raise an alert.
pub const BUDGET_AMOUNT: DecimalRange = DecimalRange::above(0, 10_000_000_000).with_decimals(2);
pub const BUDGET_THRESHOLD: DecimalRange = DecimalRange::above(0, 10).with_decimals(4);
/// The bill modes, unallocated policies and idle rules the API reads.
pub const BILL_MODES: [&str; 3] = ["showback", "chargeback", "reserved"];
pub const UNALLOCATED_POLICIES: [&str; 2] = ["kept_by_platform", "spread_proportionally"];
/// The replica billing policies as the API names them (the command line also takes `whole-card`).
pub const REPLICA_BILLINGS: [&str; 2] = ["fraction", "whole_card"];
pub const IDLE_RULES: [&str; 2] = ["weekly", "short_term"];
/// The longest GPU model or pricing key ([`model_name`]).
pub const MODEL_NAME_MAX: usize = 100;
/// The longest team name or owner.
pub const NAME_MAX: usize = 200;
/// The longest namespace ([`namespace`]).
pub const NAMESPACE_MAX: usize = 253;
/// `top` of the low-utilization report.
pub const TOP_MAX: i64 = 500;
/// `limit` of a paged list: its default and its maximum.
pub const PAGE_DEFAULT: i64 = 100;
pub const PAGE_MAX: i64 = 1000;
/// The longest window of the idle list, in hours (90 days).
pub const IDLE_HOURS_MAX: u32 = 2160;

/// One refused value: which field, and why — the [`FieldError`] every face renders, by the name the checks here
/// return it under.
pub type Invalid = FieldError;

/// Bidirectional formatting controls: they make a name display as something else (U+202E reverses it).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Characters no caller-typed text may hold: NUL and every control character (C0, DEL, C1), bidi controls,
/// line/paragraph separators and the byte-order mark (invisible, and they break CSV, PDF and log lines).
fn forbidden(c: char) -> bool {
    c.is_control() || is_bidi_control(c) || matches!(c, '\u{2028}' | '\u{2029}' | '\u{FEFF}')
}

fn describe(c: char) -> String {
    match c {
        '\0' => "a NUL byte".into(),
        c if is_bidi_control(c) => format!("a bidirectional control character (U+{:04X})", c as u32),
        c => format!("a control or invisible character (U+{:04X})", c as u32),
    }
}

/// Free text such as a display name: at most `max_chars` characters (counted as sent, so the document's
/// `maxLength` is the rule), not blank, none forbidden; stored trimmed.
pub fn text(field: &str, s: &str, max_chars: usize) -> Result<String, Invalid> {
    if let Some(c) = s.chars().find(|c| forbidden(*c)) {
        return Err(Invalid::new(field, format!("must not contain {}", describe(c))));
    }
    let t = s.trim();
    if t.is_empty() {
        return Err(Invalid::new(field, "must not be blank"));
    }
    if s.chars().count() > max_chars {
        return Err(Invalid::new(field, format!("must be at most {max_chars} characters")));
    }
    Ok(t.to_string())
}

/// The longest cost centre or GL account ([`finance_codes`]).
pub const CODE_MAX: usize = 64;

/// A team's finance codes as given (SPEC §11): each blank or absent is none; each given is text without control
/// characters, trimmed, at most [`CODE_MAX`] characters (a cost centre, a GL account) or [`NAME_MAX`] (a legal
/// entity's name). Every problem reported, by field.
pub fn finance_codes(
    cost_centre: Option<&str>,
    gl_account: Option<&str>,
    legal_entity: Option<&str>,
) -> Result<crate::billing::FinanceCodes, Vec<Invalid>> {
    let one = |field: &str, v: Option<&str>, max: usize| match v {
        Some(v) if !v.trim().is_empty() => text(field, v, max).map(Some),
        _ => Ok(None),
    };
    match (
        one("cost_centre", cost_centre, CODE_MAX),
        one("gl_account", gl_account, CODE_MAX),
        one("legal_entity", legal_entity, NAME_MAX),
    ) {
        (Ok(cost_centre), Ok(gl_account), Ok(legal_entity)) => {
            Ok(crate::billing::FinanceCodes { cost_centre, gl_account, legal_entity })
        }
        (a, b, c) => Err([a.err(), b.err(), c.err()].into_iter().flatten().collect()),
    }
}

/// The longest URL a webhook or close-event endpoint may have.
pub const URL_MAX: usize = 2000;

/// A webhook address: an absolute http(s) URL with a host, at most [`URL_MAX`] characters, as sent. Written as
/// it reads once parsed (`http://` or `https://` in lower case: the parser would also take `HTTPS:host` or
/// `http:\\host`, which nobody means), and with no `user:password@` (it would be printed wherever the URL is: a
/// receiver's credentials belong in its signature secret).
pub fn http_url(field: &str, s: &str) -> Result<String, Invalid> {
    let ok = s.chars().count() <= URL_MAX
        && !s.chars().any(forbidden)
        && (s.starts_with("http://") || s.starts_with("https://"))
        && url::Url::parse(s)
            .is_ok_and(|u| u.host_str().is_some() && u.username().is_empty() && u.password().is_none());
    if ok {
        Ok(s.to_string())
    } else {
        let shown: String = s.chars().take(100).collect();
        Err(Invalid::new(
            field,
            format!(
                "`{}{}` is not an http(s) URL without credentials, e.g. https://hooks.example/cardhour",
                shown.escape_debug(),
                if shown.len() < s.len() { "…" } else { "" }
            ),
        ))
    }
}

/// Optional free text: absent or blank is `None`, anything else must pass [`text`].
pub fn optional_text(field: &str, s: Option<&str>, max_chars: usize) -> Result<Option<String>, Invalid> {
    match s {
        Some(s) if !s.trim().is_empty() || s.chars().any(forbidden) => text(field, s, max_chars).map(Some),
        _ => Ok(None),
    }
}

/// A name used as a key (a GPU model, a DCGM model name, a pricing key): [`text`] of at most 100 characters.
pub fn model_name(field: &str, s: &str) -> Result<String, Invalid> {
    text(field, s, MODEL_NAME_MAX)
}

/// A Kubernetes namespace as stored with usage: not blank, no whitespace, at most 253 characters.
pub fn namespace(field: &str, s: &str) -> Result<String, Invalid> {
    let t = text(field, s, NAMESPACE_MAX)?;
    // on the text as sent, as the document's pattern says: a namespace has no space anywhere, not even around it
    if s.chars().any(char::is_whitespace) {
        return Err(Invalid::new(field, "must be a Kubernetes namespace name (no spaces)"));
    }
    Ok(t)
}

/// A cluster name as the `clusters` table allows it: `[A-Za-z0-9][A-Za-z0-9_.-]{0,62}`.
pub fn cluster(field: &str, s: &str) -> Result<String, Invalid> {
    let mut chars = s.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.len() <= 63
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok { Ok(s.to_string()) } else { Err(Invalid::new(field, "use A-Z, a-z, 0-9, `.`, `_`, `-` (at most 63)")) }
}

/// A node's name as kube-state-metrics writes it: free text ([`text`]) of at most [`NODE_NAME_MAX`] characters;
/// stored trimmed.
pub fn node_name(field: &str, s: &str) -> Result<String, Invalid> {
    text(field, s, NODE_NAME_MAX)
}
/// The longest node name (a Kubernetes object name: a DNS subdomain).
pub const NODE_NAME_MAX: usize = 253;

/// What a checked name is besides its check: its text (`as_str`, `into_string`, `Display`, `AsRef<str>`), serialised
/// as that string and deserialised only through the check — a value in a path, a query or a body is parsed once, at
/// the edge, and carried typed down to `db`, which binds `as_str()`.
macro_rules! string_newtype {
    ($name:ident, $what:literal, $parse:expr) => {
        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = Invalid;
            fn from_str(s: &str) -> Result<$name, Invalid> {
                let parse: fn(&str) -> Result<$name, Invalid> = $parse;
                parse(s)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        /// Through the check, inside the visitor (a path extractor then names the parameter that failed).
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                struct Visitor;
                impl serde::de::Visitor<'_> for Visitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<$name, E> {
                        s.parse().map_err(|e: Invalid| E::custom(e.message))
                    }
                }
                d.deserialize_str(Visitor)
            }
        }
    };
}

/// A team id: `[a-z0-9][a-z0-9_.-]{0,62}` (the `teams` table's rule).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TeamId(String);

impl TeamId {
    pub fn parse(field: &str, s: &str) -> Result<TeamId, Invalid> {
        let mut chars = s.chars();
        let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && s.len() <= 63
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '-'));
        if ok {
            Ok(TeamId(s.to_string()))
        } else {
            Err(Invalid::new(field, "a team id uses a-z, 0-9, `.`, `_`, `-` (at most 63, starting with a-z or 0-9)"))
        }
    }

    /// The team a namespace's team label names (SPEC §4): ASCII letters lower-cased, every other character
    /// outside `[a-z0-9-]` as `-`, `-` trimmed from both ends, at most 63 characters; `None` when nothing is left.
    /// The SQL function `team_id_of_label` applies the same rule where rows are stored.
    pub fn from_label(label: &str) -> Option<TeamId> {
        let mapped: String = label
            .chars()
            .map(|c| {
                let c = c.to_ascii_lowercase();
                if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' { c } else { '-' }
            })
            .collect();
        let cut: String = mapped.trim_matches('-').chars().take(63).collect();
        let id = cut.trim_end_matches('-');
        (!id.is_empty()).then(|| TeamId(id.to_string()))
    }
}

string_newtype!(TeamId, "a team id", |s| TeamId::parse("team", s));

/// A cluster name, checked by [`cluster`]: what the pages, the API and the command line hand down to `db`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterName(String);

impl ClusterName {
    pub fn parse(field: &str, s: &str) -> Result<ClusterName, Invalid> {
        cluster(field, s).map(ClusterName)
    }
}
string_newtype!(ClusterName, "a cluster name", |s| ClusterName::parse("cluster", s));

/// A Kubernetes namespace, checked by [`namespace`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace(String);

impl Namespace {
    pub fn parse(field: &str, s: &str) -> Result<Namespace, Invalid> {
        namespace(field, s).map(Namespace)
    }
}
string_newtype!(Namespace, "a namespace", |s| Namespace::parse("namespace", s));

/// A Kueue ClusterQueue's or a Volcano queue's name: a Kubernetes object name — not blank, no whitespace, at most
/// 253 characters (as a [`namespace`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueName(String);

impl QueueName {
    pub fn parse(field: &str, s: &str) -> Result<QueueName, Invalid> {
        let t = text(field, s, NAMESPACE_MAX)?;
        // as a namespace: no space anywhere, not even around it
        if s.chars().any(char::is_whitespace) {
            return Err(Invalid::new(field, "must be a queue name (no spaces)"));
        }
        Ok(QueueName(t))
    }
}
string_newtype!(QueueName, "a queue name", |s| QueueName::parse("queue", s));

/// A GPU model or pricing key, checked by [`model_name`] (stored trimmed, at most [`MODEL_NAME_MAX`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuModel(String);

impl GpuModel {
    pub fn parse(field: &str, s: &str) -> Result<GpuModel, Invalid> {
        model_name(field, s).map(GpuModel)
    }
}
string_newtype!(GpuModel, "a GPU model", |s| GpuModel::parse("gpu_model", s));

/// A date within [`FIRST_DATE`] ..= [`LAST_DATE`].
pub fn date(field: &str, d: NaiveDate) -> Result<NaiveDate, Invalid> {
    if (FIRST_DATE..=LAST_DATE).contains(&d) {
        Ok(d)
    } else {
        Err(Invalid::new(field, format!("must be between {FIRST_DATE} and {LAST_DATE}")))
    }
}

/// Exactly `YYYY-MM-DD`, within the date range.
pub fn parse_date(field: &str, s: &str) -> Result<NaiveDate, Invalid> {
    let b = s.as_bytes();
    let shaped = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    let d = shaped
        .then(|| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok())
        .flatten()
        .ok_or_else(|| Invalid::new(field, format!("`{}` is not a date (YYYY-MM-DD)", s.escape_debug())))?;
    date(field, d)
}

/// A date as CMDB exports and spreadsheets write it: `2026-11-01`, `2026/11/01`, `2026/11/1`, `2026.11.1` or
/// `20261101`, within the date range.
pub fn lenient_date(field: &str, s: &str) -> Result<NaiveDate, Invalid> {
    let t = s.trim();
    let refuse = || {
        Invalid::new(
            field,
            format!("`{}` is not a date (2026-11-01, 2026/11/01, 2026/11/1 or 20261101)", s.escape_debug()),
        )
    };
    let parts: Vec<&str> = if t.len() == 8 && t.bytes().all(|c| c.is_ascii_digit()) {
        vec![&t[..4], &t[4..6], &t[6..]]
    } else {
        let sep = t.chars().find(|c| matches!(c, '-' | '/' | '.')).ok_or_else(refuse)?;
        t.split(sep).collect()
    };
    let digits =
        |p: &str, len: std::ops::RangeInclusive<usize>| len.contains(&p.len()) && p.bytes().all(|c| c.is_ascii_digit());
    let [y, m, d] = parts[..] else { return Err(refuse()) };
    if !(digits(y, 4..=4) && digits(m, 1..=2) && digits(d, 1..=2)) {
        return Err(refuse());
    }
    let (y, m, d) =
        (y.parse().map_err(|_| refuse())?, m.parse().map_err(|_| refuse())?, d.parse().map_err(|_| refuse())?);
    date(field, NaiveDate::from_ymd_opt(y, m, d).ok_or_else(refuse)?)
}

/// An instant within the date range (UTC).
pub fn instant(field: &str, t: DateTime<Utc>) -> Result<DateTime<Utc>, Invalid> {
    // a day of margin each side: a time typed on the first or last day, in any zone, is in range
    let first = (FIRST_DATE - Duration::days(1)).and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    let end = (LAST_DATE + Duration::days(2)).and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    if (first..=end).contains(&t) {
        Ok(t)
    } else {
        Err(Invalid::new(field, format!("must be between {FIRST_DATE} and {LAST_DATE}")))
    }
}

/// A time as typed, before the billing time zone is known (the command line parses its arguments before it reads
/// the settings): with an offset it is an instant; without, a wall-clock time (a bare date: its midnight) in the
/// billing time zone. The one rule for every time the CLI and the API accept (SPEC: days are billing days):
/// `2026-11-01` (the day), `2026-11-01T08:00` / `2026-11-01 08:00` / `…08:00:00[.123]` (local), each of those with
/// `Z`, `+08:00` or `+0800` (an instant; RFC 3339 included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeInput {
    Instant(DateTime<Utc>),
    Local(NaiveDateTime),
}

/// What [`TimeInput`] accepts, for messages and help texts.
pub const TIME_FORMATS: &str = "a date (2026-11-01, a day in the billing time zone) or a time with or without \
    seconds and offset (2026-11-01T08:00, 2026-11-01 08:00:00+08:00, RFC 3339 2026-11-01T00:00:00Z); without an \
    offset it is the billing time zone's";

impl TimeInput {
    pub fn parse(field: &str, s: &str) -> Result<TimeInput, Invalid> {
        let t = s;
        let refuse = || Invalid::new(field, format!("`{}` is not a time: use {TIME_FORMATS}", s.escape_debug()));
        if !INSTANT_RE.is_match(t) {
            // a well-formed time of another century is out of range, not malformed: say so
            let year = t.get(..4).filter(|_| t.as_bytes().get(4) == Some(&b'-')).and_then(|y| y.parse::<i32>().ok());
            if year.is_some_and(|y| !(FIRST_DATE.year()..=LAST_DATE.year()).contains(&y)) {
                return Err(Invalid::new(field, format!("must be between {FIRST_DATE} and {LAST_DATE}")));
            }
            return Err(refuse());
        }
        if t.len() == 10 {
            let d = NaiveDate::parse_from_str(t, "%Y-%m-%d").map_err(|_| refuse())?;
            return Ok(TimeInput::Local(date(field, d)?.and_hms_opt(0, 0, 0).expect("midnight")));
        }
        // the date and the time apart by `T`, `t` or one space
        let b = t.as_bytes();
        if b.len() < 16
            || !matches!(b[10], b'T' | b't' | b' ')
            || !b[..10].iter().all(|c| c.is_ascii_digit() || *c == b'-')
        {
            return Err(refuse());
        }
        let normal = format!("{}T{}", &t[..10], &t[11..]);
        let normal = match normal.strip_suffix(['Z', 'z']) {
            Some(rest) => format!("{rest}+00:00"),
            None => normal,
        };
        for f in ["%Y-%m-%dT%H:%M:%S%.f%:z", "%Y-%m-%dT%H:%M%:z", "%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%dT%H:%M%z"] {
            if let Ok(at) = DateTime::parse_from_str(&normal, f) {
                return Ok(TimeInput::Instant(instant(field, at.with_timezone(&Utc))?));
            }
        }
        for f in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
            if let Ok(local) = NaiveDateTime::parse_from_str(&normal, f) {
                date(field, local.date())?;
                return Ok(TimeInput::Local(local));
            }
        }
        Err(refuse())
    }

    /// The instant, a local time read in `tz`: one that happens twice (clocks falling back) is the earlier, one
    /// that does not exist (clocks springing forward) is refused.
    pub fn resolve(self, field: &str, tz: chrono_tz::Tz) -> Result<DateTime<Utc>, Invalid> {
        use chrono::TimeZone;
        let at = match self {
            TimeInput::Instant(t) => t,
            TimeInput::Local(l) if l.time() == chrono::NaiveTime::MIN => {
                crate::billing::month::start_of_day(tz, l.date())
            }
            TimeInput::Local(l) => {
                tz.from_local_datetime(&l).earliest().map(|t| t.with_timezone(&Utc)).ok_or_else(|| {
                    Invalid::new(field, format!("{l} does not exist in {tz} (the clocks skip it); give an offset"))
                })?
            }
        };
        instant(field, at)
    }
}

/// Read from a string ([`TimeInput::parse`]): a query or body field of this type answers a bad value with the
/// formats accepted, not with a parser's "premature end of input".
impl<'de> serde::Deserialize<'de> for TimeInput {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<TimeInput, D::Error> {
        let s = String::deserialize(d)?;
        TimeInput::parse("time", &s).map_err(|e| serde::de::Error::custom(e.message))
    }
}

/// `[from, to)`: both in range, `to` after `from`, at most `max_days` long.
pub fn range(from: DateTime<Utc>, to: DateTime<Utc>, max_days: i64) -> Result<(), Invalid> {
    instant("from", from)?;
    instant("to", to)?;
    if to <= from {
        return Err(Invalid::new("to", "must be after `from`"));
    }
    if to - from > Duration::days(max_days) {
        return Err(Invalid::new("to", format!("the range may span at most {max_days} days")));
    }
    Ok(())
}

/// A bill mode as the API names it: `showback`, `chargeback` or `reserved`.
pub fn bill_mode(field: &str, s: &str) -> Result<BillMode, Invalid> {
    BillMode::parse(s)
        .ok_or_else(|| Invalid::new(field, format!("`{}`: use showback, chargeback or reserved", s.escape_debug())))
}

/// An unallocated-capacity policy as the API names it: `kept_by_platform` or `spread_proportionally`.
pub fn unallocated_policy(field: &str, s: &str) -> Result<UnallocatedPolicy, Invalid> {
    [UnallocatedPolicy::KeptByPlatform, UnallocatedPolicy::SpreadProportionally]
        .into_iter()
        .find(|m| m.as_str() == s)
        .ok_or_else(|| {
            Invalid::new(field, format!("`{}`: use kept_by_platform or spread_proportionally", s.escape_debug()))
        })
}

/// A policy asked for (`mode`, `unallocated`, `replicas`, any may be absent).
pub fn policy_choice(
    mode: Option<&str>,
    unallocated: Option<&str>,
    replicas: Option<&str>,
) -> Result<PolicyChoice, Invalid> {
    Ok(PolicyChoice {
        mode: mode.map(|m| bill_mode("mode", m)).transpose()?,
        unallocated: unallocated.map(|u| unallocated_policy("unallocated", u)).transpose()?,
        replicas: replicas.map(|r| replica_billing("replicas", r)).transpose()?,
    })
}

/// A replica billing policy as the API names it: `fraction` or `whole_card`.
pub fn replica_billing(field: &str, s: &str) -> Result<crate::billing::ReplicaBilling, Invalid> {
    // only the document's names: what the enum does not list is refused, as it says
    REPLICA_BILLINGS
        .contains(&s)
        .then(|| crate::billing::ReplicaBilling::parse(s).ok())
        .flatten()
        .ok_or_else(|| Invalid::new(field, format!("`{}`: use fraction or whole_card", s.escape_debug())))
}

/// A count bound such as `top` or `limit`.
pub fn bounded(field: &str, v: i64, min: i64, max: i64) -> Result<i64, Invalid> {
    if (min..=max).contains(&v) { Ok(v) } else { Err(Invalid::new(field, format!("must be between {min} and {max}"))) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::billing::Month;

    #[test]
    fn an_endpoint_url_is_http_s_as_written_without_credentials() {
        for ok in ["http://127.0.0.1:9/hook", "https://erp.example/cardhour?x=1"] {
            assert_eq!(http_url("url", ok).unwrap(), ok);
        }
        for bad in [
            "HTTPS://erp.example/hook",
            "http:erp.example/hook",
            "http:\\\\erp.example\\hook",
            "https://user:pw@erp.example/hook",
            "ftp://erp.example/hook",
            "/hook",
            "https://",
        ] {
            let e = http_url("url", bad).unwrap_err();
            assert_eq!(e.field, "url", "{bad}");
        }
        let long = format!("https://erp.example/{}", "x".repeat(5000));
        assert!(http_url("url", &long).unwrap_err().message.chars().count() < 200, "the message quotes a prefix");
    }

    #[test]
    fn replica_billings_are_the_documents_names_only() {
        for name in REPLICA_BILLINGS {
            assert!(replica_billing("replicas", name).is_ok(), "{name}");
        }
        for bad in ["", "whole-card", "Fraction", " fraction"] {
            assert_eq!(replica_billing("replicas", bad).unwrap_err().field, "replicas", "{bad:?}");
        }
    }
    use proptest::prelude::*;

    #[test]
    fn text_refuses_what_is_invisible_or_blank() {
        assert_eq!(text("name", "  视觉组 ", 200).unwrap(), "视觉组");
        for bad in ["", "   ", "a\0b", "evil\u{202E}gpj.exe", "a\u{7}", "a\nb", "a\u{85}", "\u{2066}x", "x\u{FEFF}"] {
            let e = text("name", bad, 200).unwrap_err();
            assert_eq!(e.field, "name", "{bad:?}");
        }
        assert!(text("name", "a\0", 200).unwrap_err().message.contains("NUL"));
        assert!(text("name", "\u{202E}x", 200).unwrap_err().message.contains("U+202E"));
        assert!(text("name", &"x".repeat(201), 200).is_err());
        assert_eq!(text("name", &"组".repeat(200), 200).unwrap().chars().count(), 200);
        assert_eq!(optional_text("owner", Some("  "), 200).unwrap(), None);
        assert!(optional_text("owner", Some("\0"), 200).is_err());
        assert!(model_name("model", " ").is_err());
        assert!(namespace("namespace", "a b").is_err());
    }

    #[test]
    fn dates_and_months_stay_in_range() {
        assert!(parse_date("d", "2026-11-01").is_ok());
        for bad in ["-5000-01-01", "0000-01-01", "200000-01-01", "1999-12-31", "2101-01-01", "2026-13-01", "2026-1-01"]
        {
            assert_eq!(parse_date("d", bad).unwrap_err().field, "d", "{bad}");
        }
        assert_eq!(Month::parse("2026-11").unwrap().to_string(), "2026-11");
        for bad in ["0000-01", "1999-12", "2101-01", "9999-12", "2026-13", "2026-1"] {
            assert!(Month::parse(bad).is_err(), "{bad}");
        }
        assert!(Month::parse("2000-01").is_ok() && Month::parse("2100-12").is_ok());
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        assert!(range(t("2026-11-01T00:00:00Z"), t("2026-11-02T00:00:00Z"), 92).is_ok());
        assert_eq!(range(t("2026-11-02T00:00:00Z"), t("2026-11-01T00:00:00Z"), 92).unwrap_err().field, "to");
        assert_eq!(range(t("2026-01-01T00:00:00Z"), t("2026-06-01T00:00:00Z"), 92).unwrap_err().field, "to");
        assert_eq!(range(t("1970-01-01T00:00:00Z"), t("2026-06-01T00:00:00Z"), 92).unwrap_err().field, "from");
    }

    #[test]
    fn times_with_or_without_seconds_and_offset_dates_in_the_billing_zone() {
        let sh = chrono_tz::Asia::Shanghai;
        let utc = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let at = |s: &str| TimeInput::parse("from", s).and_then(|t| t.resolve("from", sh));
        for (typed, expect) in [
            ("2026-11-01", "2026-10-31T16:00:00Z"),
            ("2026-11-01T08:00", "2026-11-01T00:00:00Z"),
            ("2026-11-01 08:00", "2026-11-01T00:00:00Z"),
            ("2026-11-01T08:00:00", "2026-11-01T00:00:00Z"),
            ("2026-11-01 08:00:00+08:00", "2026-11-01T00:00:00Z"),
            ("2026-11-01T08:00:00+08:00", "2026-11-01T00:00:00Z"),
            ("2026-11-01T08:00+0800", "2026-11-01T00:00:00Z"),
            ("2026-11-01T00:00Z", "2026-11-01T00:00:00Z"),
            ("2026-11-01T00:00:00Z", "2026-11-01T00:00:00Z"),
            ("2026-11-01t00:00:00.500z", "2026-11-01T00:00:00.500Z"),
        ] {
            assert_eq!(at(typed).unwrap(), utc(expect), "{typed}");
        }
        for bad in [
            "2026-11-29T",
            "2026-11-29T8",
            "yesterday",
            "2026-13-01",
            "2026-11-01T25:00",
            "1999-12-31",
            "",
            "2026-11-01T08:00+8",
        ] {
            let e = at(bad).unwrap_err();
            assert_eq!(e.field, "from", "{bad}");
            assert!(!e.message.contains("premature"), "{bad}: {}", e.message);
        }
        // a local time the clocks skip is refused, one they repeat is the earlier
        let ny = chrono_tz::America::New_York;
        assert!(TimeInput::parse("t", "2026-03-08T02:30").unwrap().resolve("t", ny).is_err());
        assert_eq!(
            TimeInput::parse("t", "2026-11-01T01:30").unwrap().resolve("t", ny).unwrap(),
            utc("2026-11-01T05:30:00Z")
        );
        let e = serde_json::from_str::<TimeInput>("\"2026-11-29T\"").unwrap_err().to_string();
        assert!(e.contains("is not a time"), "{e}");
    }

    #[test]
    fn cmdb_dates_in_the_common_formats() {
        let nov1 = NaiveDate::from_ymd_opt(2026, 11, 1).unwrap();
        for ok in ["2026-11-01", "2026/11/01", "2026/11/1", "20261101", "2026.11.1", " 2026-11-1 "] {
            assert_eq!(lenient_date("d", ok).unwrap(), nov1, "{ok}");
        }
        for bad in ["2026-13-01", "2026/11", "2026-11/01", "1101", "26/11/01", "2026111", "someday", "", "1999/12/31"] {
            assert_eq!(lenient_date("d", bad).unwrap_err().field, "d", "{bad}");
        }
    }

    /// The newtypes read from JSON, a query or a path only through their checks, and write back as their text.
    #[test]
    fn names_deserialise_through_their_checks() {
        let t: TeamId = serde_json::from_str("\"vision\"").unwrap();
        assert_eq!((t.as_str(), serde_json::to_string(&t).unwrap().as_str()), ("vision", "\"vision\""));
        assert!(serde_json::from_str::<TeamId>("\"Vision\"").is_err());
        assert_eq!("c1.x".parse::<ClusterName>().unwrap().as_str(), "c1.x");
        assert!(serde_json::from_str::<ClusterName>("\"a b\"").is_err());
        assert_eq!(serde_json::from_str::<Namespace>("\"recsys\"").unwrap().to_string(), "recsys");
        assert!(serde_json::from_str::<Namespace>("\"rec sys\"").is_err());
        assert_eq!(serde_json::from_str::<GpuModel>("\" NVIDIA L40S \"").unwrap().as_str(), "NVIDIA L40S");
        let long = format!("\"{}\"", "G".repeat(MODEL_NAME_MAX + 1));
        assert!(serde_json::from_str::<GpuModel>(&long).is_err());
        assert!(serde_json::from_str::<TeamId>("7").is_err(), "a number is no id");
        let e = "Bad\u{202E}Team".parse::<TeamId>().unwrap_err();
        assert_eq!(e.field, "team");
    }

    #[test]
    fn team_ids() {
        assert_eq!(TeamId::parse("id", "vision-2").unwrap().as_str(), "vision-2");
        let label = |l: &str| TeamId::from_label(l).map(TeamId::into_string);
        assert_eq!(label("NLP"), Some("nlp".into()));
        assert_eq!(label("nlp"), Some("nlp".into()));
        assert_eq!(label(" Vision_Team.2 "), Some("vision-team-2".into()));
        assert_eq!(label("视觉"), None);
        assert_eq!(label("--"), None);
        assert_eq!(label(&format!("{}-b", "a".repeat(62))), Some("a".repeat(62)));
        for bad in ["", "Vision", "-x", "a b", "a\0", &"a".repeat(64)] {
            assert!(TeamId::parse("id", bad).is_err(), "{bad:?}");
        }
    }

    /// The document's patterns accept what the checks accept, on the edges and on arbitrary strings.
    #[test]
    fn patterns_agree_with_the_checks() {
        let re = |p: &str| regex::Regex::new(p).unwrap();
        let (m, d, t, c) = (re(MONTH_PATTERN), re(DATE_PATTERN), re(TEAM_ID_PATTERN), re(CLUSTER_PATTERN));
        let (txt, ns) = (re(&text_pattern()), re(&namespace_pattern()));
        for s in ["2000-01", "2100-12", "1999-12", "2101-01", "2026-13", "2026-00", "2026-1", " 2026-01", "x"] {
            assert_eq!(m.is_match(s), Month::parse(s).is_ok(), "{s:?}");
        }
        // the date pattern is the shape and the years; `format: date` adds the calendar
        for s in ["2000-01-01", "2100-12-31", "1999-12-31", "2101-01-01", "2026-1-01", "2026-02-28"] {
            assert_eq!(d.is_match(s), parse_date("d", s).is_ok(), "{s:?}");
        }
        for s in ["a", "vision-2", "a.b_c", "-x", "Vision", "", &"a".repeat(63), &"a".repeat(64)] {
            assert_eq!(t.is_match(s), TeamId::parse("t", s).is_ok(), "{s:?}");
        }
        for s in ["c1", "C.1_x-y", "-c", "", &"c".repeat(63), &"c".repeat(64)] {
            assert_eq!(c.is_match(s), cluster("c", s).is_ok(), "{s:?}");
        }
        for s in ["视觉组", " x ", "", "  ", "a\0b", "a\u{202E}b", "a\nb", "x\u{FEFF}", "a b"] {
            assert_eq!(txt.is_match(s), text("f", s, 1000).is_ok(), "{s:?}");
            assert_eq!(ns.is_match(s), namespace("f", s).is_ok(), "{s:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Whatever passes is trimmed, non-empty, within the limit and free of forbidden characters.
        #[test]
        fn accepted_text_is_clean(s in any::<String>()) {
            if let Ok(t) = text("f", &s, 50) {
                prop_assert!(!t.is_empty() && t.chars().count() <= 50);
                prop_assert!(!t.chars().any(forbidden));
                prop_assert_eq!(t.trim(), t.as_str());
            }
        }

        /// A label's team id is a valid team id, and its own label: the rule is idempotent, and labels differing
        /// only in ASCII case make one team.
        #[test]
        fn a_label_makes_a_valid_team_id(s in "\\PC{0,80}") {
            if let Some(id) = TeamId::from_label(&s) {
                prop_assert!(TeamId::parse("id", id.as_str()).is_ok(), "{:?} → {:?}", s, id.as_str());
                prop_assert_eq!(TeamId::from_label(id.as_str()).map(TeamId::into_string), Some(id.to_string()));
                prop_assert_eq!(
                    TeamId::from_label(&s.to_ascii_uppercase()).map(TeamId::into_string), Some(id.into_string()));
            }
        }

        #[test]
        fn text_patterns_agree_on_any_string(s in "\\PC{0,12}|[\\x00-\\x20\\u{202A}-\\u{202E}a ]{0,6}") {
            let txt = regex::Regex::new(&text_pattern()).unwrap();
            let ns = regex::Regex::new(&namespace_pattern()).unwrap();
            prop_assert_eq!(txt.is_match(&s), text("f", &s, 1000).is_ok(), "{:?}", s);
            prop_assert_eq!(ns.is_match(&s), namespace("f", &s).is_ok(), "{:?}", s);
        }

        #[test]
        fn month_parse_never_panics(s in "\\PC{0,10}") {
            if let Ok(m) = Month::parse(&s) {
                prop_assert!((2000..=2100).contains(&m.year()));
            }
        }
    }
}
