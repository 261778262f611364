//! CMDB imports of namespace → team mappings (SPEC §4), for the API and the command line alike: the file's encoding
//! is detected (UTF-8 with or without BOM, UTF-16 with BOM, else GB18030, the superset of the GBK that Chinese Excel
//! saves), dates are read in the common CMDB formats, every row is checked before anything is written (all errors
//! at once, by line and field), and the import is idempotent: a row equal to the stored mapping is `unchanged` (no
//! write, no audit entry), a row naming another team for a stored cluster, namespace and day is an `update`, a new
//! one an `insert`. A dry run reports the same per row and writes nothing.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;

use crate::db::{self, audit, teams::Mapping, teams::Team};
use crate::validate::{self, ClusterName, Invalid, Namespace, TeamId};

/// Each row may re-attribute stored usage: an import is bounded so that it cannot hold the database for minutes.
pub const MAX_IMPORT_ROWS: usize = 10_000;

/// One checked row of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportRow {
    /// The row's line in the file (the header is line 1).
    pub line: usize,
    pub cluster: Option<ClusterName>,
    pub namespace: Namespace,
    pub team: TeamId,
    pub valid_from: NaiveDate,
    pub team_name: Option<String>,
    pub owner: Option<String>,
}

/// What an import does (or, dry, would do) with a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RowAction {
    /// A new mapping.
    Insert,
    /// The stored mapping of this cluster, namespace and day pointed at another team.
    Update,
    /// Equal to what is stored (or to an earlier row of the file): nothing written.
    Unchanged,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RowOutcome {
    /// The row's line in the file (the header is line 1).
    pub line: usize,
    pub action: RowAction,
    pub cluster: Option<String>,
    pub namespace: String,
    pub team: String,
    pub valid_from: NaiveDate,
    /// An update's team before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_team: Option<String>,
}

/// What an import did (or, dry, would do).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ImportReport {
    /// Nothing was written.
    pub dry_run: bool,
    pub inserted: usize,
    pub updated: usize,
    pub unchanged: usize,
    /// Teams the file names that did not exist (created with the row's `team_name` and `owner`).
    pub teams_created: usize,
    /// One per row, in file order.
    pub rows: Vec<RowOutcome>,
    /// The mappings written (inserted or updated), as stored; empty on a dry run.
    pub mappings: Vec<Mapping>,
}

impl ImportReport {
    /// Whether the import wrote anything.
    pub fn changed(&self) -> bool {
        !self.dry_run && (self.inserted + self.updated + self.teams_created) > 0
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Rows (or the file) refused: every problem, by `row N: field`.
    #[error("{} problem(s) in the file", .0.len())]
    Invalid(Vec<Invalid>),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// The file's text: a BOM decides (UTF-8, UTF-16), else valid UTF-8 is UTF-8, else it must be GB18030 (which
/// decodes GBK and GB2312 too). Anything else is refused rather than imported as mojibake.
pub fn decode(bytes: &[u8]) -> Result<String, Invalid> {
    if let Some((enc, bom)) = encoding_rs::Encoding::for_bom(bytes) {
        return enc
            .decode_without_bom_handling_and_without_replacement(&bytes[bom..])
            .map(|t| t.into_owned())
            .ok_or_else(|| Invalid::new("body", format!("the file starts with a {} BOM but is not {0}", enc.name())));
    }
    if let Ok(t) = std::str::from_utf8(bytes) {
        return Ok(t.to_string());
    }
    encoding_rs::GB18030
        .decode_without_bom_handling_and_without_replacement(bytes)
        .map(|t| t.into_owned())
        .ok_or_else(|| Invalid::new("body", "the file is neither UTF-8 nor GBK/GB18030: save it as CSV UTF-8"))
}

#[derive(Debug, Deserialize)]
struct CsvRow {
    namespace: String,
    team: String,
    valid_from: String,
    team_name: Option<String>,
    owner: Option<String>,
    cluster: Option<String>,
}

/// Every row checked before anything is written; all errors reported at once, as `row N: field` (N the line).
pub fn parse(body: &str) -> Result<Vec<ImportRow>, Vec<Invalid>> {
    let (rows, errors) = parse_rows(body);
    if errors.is_empty() { Ok(rows) } else { Err(errors) }
}

/// The good rows of a file and the problems of the others (what a preview shows side by side); [`parse`] is
/// this, refusing the file when there is any problem.
pub fn parse_rows(body: &str) -> (Vec<ImportRow>, Vec<Invalid>) {
    let body = body.strip_prefix('\u{feff}').unwrap_or(body);
    let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(body.as_bytes());
    let mut errors = Vec::new();
    let mut rows: Vec<ImportRow> = Vec::new();
    for (i, rec) in reader.deserialize::<CsvRow>().enumerate() {
        if i >= MAX_IMPORT_ROWS {
            errors.push(Invalid::new("body", format!("at most {MAX_IMPORT_ROWS} rows per import; split the file")));
            break;
        }
        let line = i + 2;
        let at = format!("row {line}");
        let row = match rec {
            Ok(r) => r,
            Err(e) => {
                errors.push(Invalid::new(at, e.to_string()));
                continue;
            }
        };
        let before = errors.len();
        let mut bad = |field: &str, message: String| errors.push(Invalid::new(format!("{at}: {field}"), message));
        let namespace = Namespace::parse("namespace", &row.namespace).map_err(|e| bad("namespace", e.message));
        let team = TeamId::parse("team", &row.team).map_err(|_| {
            bad("team", format!("`{}` is not a team id (a-z, 0-9, `.`, `_`, `-`)", row.team.escape_debug()))
        });
        let mut texts = [None, None];
        for (slot, (field, v)) in texts.iter_mut().zip([("team_name", &row.team_name), ("owner", &row.owner)]) {
            match validate::optional_text(field, v.as_deref(), 200) {
                Ok(t) => *slot = t,
                Err(e) => bad(field, e.message),
            }
        }
        let cluster = match row.cluster.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => ClusterName::parse("cluster", c).map(Some).map_err(|e| bad("cluster", e.message)),
            None => Ok(None),
        };
        let valid_from =
            validate::lenient_date("valid_from", &row.valid_from).map_err(|e| bad("valid_from", e.message));
        if let (Ok(namespace), Ok(team), Ok(cluster), Ok(valid_from)) = (namespace, team, cluster, valid_from)
            && errors.len() == before
        {
            let [team_name, owner] = texts;
            let row = ImportRow { line, cluster, namespace, team, valid_from, team_name, owner };
            // the same cluster, namespace and day twice: equal rows are one, different teams a contradiction
            if let Some(earlier) = rows.iter().find(|r| same_key(r, &row) && r.team != row.team) {
                errors.push(Invalid::new(
                    format!("row {line}: team"),
                    format!(
                        "maps {} from {} to {}, row {} to {}",
                        row.namespace, row.valid_from, row.team, earlier.line, earlier.team
                    ),
                ));
            }
            rows.push(row);
        }
    }
    if rows.is_empty() && errors.is_empty() {
        errors.push(Invalid::new("body", "no rows (expected a header and at least one row)"));
    }
    (rows, errors)
}

fn same_key(a: &ImportRow, b: &ImportRow) -> bool {
    a.cluster == b.cluster && a.namespace == b.namespace && a.valid_from == b.valid_from
}

/// Imports `rows` inside the caller's transaction (all or nothing: the caller commits, or rolls back on an error);
/// `dry_run` decides and reports the same, writing nothing. Writes are audited as `team.put`, `mapping.create` and
/// `mapping.update`; unchanged rows write nothing at all.
pub async fn import(
    tx: &mut PgConnection,
    rows: &[ImportRow],
    actor: &str,
    dry_run: bool,
) -> Result<ImportReport, ImportError> {
    let mut report = ImportReport {
        dry_run,
        inserted: 0,
        updated: 0,
        unchanged: 0,
        teams_created: 0,
        rows: Vec::new(),
        mappings: Vec::new(),
    };
    let mut errors = Vec::new();
    let mut new_teams: Vec<&str> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        if db::teams::get(&mut *tx, &row.team).await?.is_none() && !new_teams.contains(&row.team.as_str()) {
            let name = row.team_name.clone().unwrap_or_else(|| row.team.to_string());
            let team = Team { id: row.team.to_string(), name, owner: row.owner.clone() };
            new_teams.push(row.team.as_str());
            // a concurrent import may create it first: then it is not ours to count or audit
            if !dry_run {
                if db::teams::create(&mut *tx, &team).await? {
                    audit::record(&mut *tx, actor, "team.put", &format!("team:{}", team.id), None, json(&team)).await?;
                    report.teams_created += 1;
                }
            } else {
                report.teams_created += 1;
            }
        }
        let earlier = rows[..i].iter().any(|r| same_key(r, row));
        let stored = db::teams::mapping_at(&mut *tx, row.cluster.as_ref(), &row.namespace, row.valid_from).await?;
        let (action, previous_team) = match &stored {
            _ if earlier => (RowAction::Unchanged, None),
            None => (RowAction::Insert, None),
            Some(m) if m.team_id == row.team.as_str() => (RowAction::Unchanged, None),
            Some(m) => (RowAction::Update, Some(m.team_id.clone())),
        };
        if !dry_run {
            let target = format!("namespace:{}", row.namespace);
            match (action, &stored) {
                (RowAction::Insert, _) => {
                    let m = db::teams::insert_mapping(
                        &mut *tx,
                        row.cluster.as_ref(),
                        &row.namespace,
                        &row.team,
                        row.valid_from,
                        actor,
                    )
                    .await?;
                    let Some(m) = m else {
                        // mapped concurrently between our read and our insert
                        errors.push(Invalid::new(
                            format!("row {}: valid_from", row.line),
                            format!(
                                "namespace {} was mapped from {} concurrently; import again",
                                row.namespace, row.valid_from
                            ),
                        ));
                        continue;
                    };
                    audit::record(&mut *tx, actor, "mapping.create", &target, None, json(&m)).await?;
                    report.mappings.push(m);
                }
                (RowAction::Update, Some(before)) => {
                    let m = db::teams::update_mapping_team(&mut *tx, before.id, &row.team, actor).await?;
                    audit::record(&mut *tx, actor, "mapping.update", &target, json(before), json(&m)).await?;
                    report.mappings.push(m);
                }
                _ => {}
            }
        }
        match action {
            RowAction::Insert => report.inserted += 1,
            RowAction::Update => report.updated += 1,
            RowAction::Unchanged => report.unchanged += 1,
        }
        report.rows.push(RowOutcome {
            line: row.line,
            action,
            cluster: row.cluster.as_ref().map(ToString::to_string),
            namespace: row.namespace.to_string(),
            team: row.team.to_string(),
            valid_from: row.valid_from,
            previous_team,
        });
    }
    if !errors.is_empty() {
        return Err(ImportError::Invalid(errors));
    }
    Ok(report)
}

fn json<T: Serialize>(v: &T) -> Option<serde_json::Value> {
    serde_json::to_value(v).ok().filter(|v| !v.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_all_checked_with_their_line_and_field() {
        let ok = "\u{feff}namespace,team,team_name,owner,valid_from\nrecsys,rec,推荐算法组,张三,2026/11/1\n";
        let rows = parse(ok).unwrap();
        assert_eq!(rows[0].team_name.as_deref(), Some("推荐算法组"));
        assert_eq!(rows[0].valid_from, NaiveDate::from_ymd_opt(2026, 11, 1).unwrap());
        assert_eq!(rows[0].line, 2);
        let bad = "namespace,team,valid_from\na,Bad Team,2026-11-01\nb,ok,2026-13-01\nc,x,2026-11-01\nc,y,20261101\n";
        let errs = parse(bad).unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["row 2: team", "row 3: valid_from", "row 5: team"]);
        assert!(errs[2].message.contains("row 4"), "{}", errs[2].message);
        assert!(parse("namespace,team,valid_from\n").is_err());
        assert!(parse("namespace,team\na,b\n").is_err());
        // the same row twice is one row, not a contradiction
        assert_eq!(parse("namespace,team,valid_from\na,b,2026-11-01\na,b,2026/11/01\n").unwrap().len(), 2);
    }

    #[test]
    fn encodings_are_detected() {
        let text = "namespace,team,team_name,valid_from\nrecsys,rec,推荐算法组,2026-11-01\n";
        let (gbk, _, bad) = encoding_rs::GBK.encode(text);
        assert!(!bad && std::str::from_utf8(&gbk).is_err(), "the GBK bytes are not UTF-8");
        assert_eq!(decode(&gbk).unwrap(), text);
        let (gb18030, _, _) = encoding_rs::GB18030.encode(text);
        assert_eq!(decode(&gb18030).unwrap(), text);
        let bom = [b"\xef\xbb\xbf".as_slice(), text.as_bytes()].concat();
        assert_eq!(decode(&bom).unwrap(), text);
        assert_eq!(decode(text.as_bytes()).unwrap(), text);
        let mut utf16 = vec![0xff, 0xfe];
        utf16.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        assert_eq!(decode(&utf16).unwrap(), text);
        // a byte GB18030 cannot decode either
        assert_eq!(decode(b"namespace\xff,team").unwrap_err().field, "body");
    }
}
