//! A CSV file of queue → team mappings (SPEC §10, issue 29), read and checked before anything is written, as a
//! CMDB export of namespace mappings is ([`super::mapping_file`], whose decoding, reader and refusals it shares):
//! header `queue_kind,queue,team,valid_from` and an optional `cluster`, UTF-8 (with or without BOM), UTF-16 with
//! BOM or GBK/GB18030, dates in the common CMDB formats, every row checked and every problem reported at once as
//! `row N: field` (N the line; a missing column is `row 1: <column>`, the header's line). Whether the teams and
//! clusters exist is the use case's to check (`crate::usecase::queue_mapping_import`).

use chrono::NaiveDate;
use serde::Deserialize;

use super::mapping_file::{MAX_IMPORT_ROWS, csv_reader, no_rows, too_many_rows};
use super::{ClusterName, Invalid, QueueName, TeamId};

pub use super::mapping_file::decode;

/// The queue kinds a row may name, as the API names them: a Kueue ClusterQueue, a Volcano queue.
pub const QUEUE_KINDS: [&str; 2] = ["cluster_queue", "volcano_queue"];

/// The columns every file must have (`cluster` may be left out: every cluster).
pub const REQUIRED_COLUMNS: [&str; 4] = ["queue_kind", "queue", "team", "valid_from"];

/// One checked row of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueImportRow {
    /// The row's line in the file (the header is line 1).
    pub line: usize,
    /// `None`: every cluster.
    pub cluster: Option<ClusterName>,
    /// One of [`QUEUE_KINDS`].
    pub queue_kind: &'static str,
    pub queue: QueueName,
    pub team: TeamId,
    pub valid_from: NaiveDate,
}

/// A queue kind as a row names it: one of [`QUEUE_KINDS`], exactly (the API's names, so a file and a request agree).
pub fn queue_kind(field: &str, s: &str) -> Result<&'static str, Invalid> {
    QUEUE_KINDS.iter().find(|k| **k == s).copied().ok_or_else(|| {
        Invalid::new(field, format!("`{}` is not a queue kind: use cluster_queue or volcano_queue", s.escape_debug()))
    })
}

#[derive(Debug, Deserialize)]
struct CsvRow {
    queue_kind: String,
    queue: String,
    team: String,
    valid_from: String,
    cluster: Option<String>,
}

/// Every row checked before anything is written; all problems reported at once, as `row N: field`.
pub fn parse(body: &str) -> Result<Vec<QueueImportRow>, Vec<Invalid>> {
    let (rows, errors) = parse_rows(body);
    if errors.is_empty() { Ok(rows) } else { Err(errors) }
}

/// The good rows of a file and the problems of the others (what a preview shows side by side); [`parse`] is
/// this, refusing the file when there is any problem.
pub fn parse_rows(body: &str) -> (Vec<QueueImportRow>, Vec<Invalid>) {
    let mut reader = csv_reader(body);
    // a missing column would otherwise be one csv error per row: said once, by the header's line
    let missing: Vec<Invalid> = match reader.headers() {
        Ok(header) => REQUIRED_COLUMNS
            .into_iter()
            .filter(|c| !header.iter().any(|h| h == *c))
            .map(|c| {
                Invalid::new(
                    format!("row 1: {c}"),
                    format!(
                        "missing column `{c}` (the header is queue_kind,queue,team,valid_from and optional cluster)"
                    ),
                )
            })
            .collect(),
        Err(e) => vec![Invalid::new("row 1", e.to_string())],
    };
    if !missing.is_empty() {
        return (Vec::new(), missing);
    }
    let mut errors = Vec::new();
    let mut rows: Vec<QueueImportRow> = Vec::new();
    for (i, rec) in reader.deserialize::<CsvRow>().enumerate() {
        if i >= MAX_IMPORT_ROWS {
            errors.push(too_many_rows());
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
        let queue_kind = queue_kind("queue_kind", &row.queue_kind).map_err(|e| bad("queue_kind", e.message));
        let queue = QueueName::parse("queue", &row.queue).map_err(|e| bad("queue", e.message));
        let team = TeamId::parse("team", &row.team).map_err(|_| {
            bad("team", format!("`{}` is not a team id (a-z, 0-9, `.`, `_`, `-`)", row.team.escape_debug()))
        });
        let cluster = match row.cluster.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => ClusterName::parse("cluster", c).map(Some).map_err(|e| bad("cluster", e.message)),
            None => Ok(None),
        };
        let valid_from = super::lenient_date("valid_from", &row.valid_from).map_err(|e| bad("valid_from", e.message));
        if let (Ok(queue_kind), Ok(queue), Ok(team), Ok(cluster), Ok(valid_from)) =
            (queue_kind, queue, team, cluster, valid_from)
            && errors.len() == before
        {
            let row = QueueImportRow { line, cluster, queue_kind, queue, team, valid_from };
            // the same cluster, queue and day twice: equal rows are one, different teams a contradiction
            if let Some(earlier) = rows.iter().find(|r| same_key(r, &row) && r.team != row.team) {
                errors.push(Invalid::new(
                    format!("row {line}: team"),
                    format!(
                        "maps {} from {} to {}, row {} to {}",
                        row.queue, row.valid_from, row.team, earlier.line, earlier.team
                    ),
                ));
            }
            rows.push(row);
        }
    }
    if rows.is_empty() && errors.is_empty() {
        errors.push(no_rows());
    }
    (rows, errors)
}

/// Whether two rows map the same cluster, queue and day (the table's unique key).
pub fn same_key(a: &QueueImportRow, b: &QueueImportRow) -> bool {
    a.cluster == b.cluster && a.queue_kind == b.queue_kind && a.queue == b.queue && a.valid_from == b.valid_from
}

/// The line a problem names (`row 3: team` → 3, `row 3` → 3); 0 for the file's own (`body`), which come first.
pub fn line_of(field: &str) -> usize {
    field.strip_prefix("row ").and_then(|r| r.split(':').next()).and_then(|n| n.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_all_checked_with_their_line_and_field() {
        let ok = "\u{feff}queue_kind,queue,team,valid_from,cluster\ncluster_queue,cq-a,rec,2026/11/1,\n\
                  volcano_queue,vq,nlp,20261101,gpu-1\n";
        let rows = parse(ok).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].line, rows[0].queue_kind, rows[0].cluster.as_ref()), (2, "cluster_queue", None));
        assert_eq!(rows[0].valid_from, NaiveDate::from_ymd_opt(2026, 11, 1).unwrap());
        assert_eq!(rows[1].cluster.as_ref().map(ClusterName::as_str), Some("gpu-1"));
        let bad = "queue_kind,queue,team,valid_from\nkueue,cq-a,rec,2026-11-01\ncluster_queue,cq b,rec,2026-11-01\n\
                   cluster_queue,cq-c,Bad Team,2026-13-01\ncluster_queue,cq-d,x,2026-11-01\n\
                   cluster_queue,cq-d,y,2026/11/01\nvolcano_queue,cq-d,y,2026-11-01\n";
        let errs = parse(bad).unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["row 2: queue_kind", "row 3: queue", "row 4: team", "row 4: valid_from", "row 6: team"],
            "{errs:?}"
        );
        assert!(errs[4].message.contains("row 5"), "{}", errs[4].message);
        // the same row twice is one row, not a contradiction; another kind is another queue
        let twice = "queue_kind,queue,team,valid_from\ncluster_queue,q,a,2026-11-01\ncluster_queue,q,a,2026/11/01\n";
        assert_eq!(parse(twice).unwrap().len(), 2);
    }

    #[test]
    fn a_missing_column_is_named_once_by_the_header() {
        let errs = parse("queue,team\nq,a\nq2,b\n").unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["row 1: queue_kind", "row 1: valid_from"]);
        assert_eq!(parse("").unwrap_err()[0].field, "row 1: queue_kind");
        assert_eq!(parse("queue_kind,queue,team,valid_from\n").unwrap_err()[0].field, "body");
        // a column the file has beside them (a CMDB's own) is no problem
        assert!(parse("id,queue_kind,queue,team,valid_from\n7,cluster_queue,q,a,2026-11-01\n").is_ok());
    }

    #[test]
    fn a_gbk_file_is_read() {
        let text = "queue_kind,queue,team,valid_from,cluster\ncluster_queue,推荐队列,rec,2026/11/1,\n";
        let (gbk, _, bad) = encoding_rs::GBK.encode(text);
        assert!(!bad && std::str::from_utf8(&gbk).is_err());
        let rows = parse(&decode(&gbk).unwrap()).unwrap();
        assert_eq!(rows[0].queue.as_str(), "推荐队列");
    }

    #[test]
    fn problems_sort_by_their_line() {
        assert_eq!(line_of("row 12: team"), 12);
        assert_eq!(line_of("row 3"), 3);
        assert_eq!(line_of("body"), 0);
        assert_eq!(queue_kind("k", "cluster_queue").unwrap(), "cluster_queue");
        assert_eq!(queue_kind("k", "ClusterQueue").unwrap_err().field, "k");
    }
}
