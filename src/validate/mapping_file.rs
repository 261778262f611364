//! A CMDB export of namespace → team mappings (SPEC §4), read and checked before anything is written: the file's
//! encoding is detected (UTF-8 with or without BOM, UTF-16 with BOM, else GB18030, the superset of the GBK that
//! Chinese Excel saves), dates are read in the common CMDB formats, and every row is checked, all errors at once, by
//! line and field. Writing the rows is the use case's (`crate::usecase::mapping_import`).

use chrono::NaiveDate;
use serde::Deserialize;

use super::{ClusterName, Invalid, Namespace, TeamId};

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
    /// The team's finance codes from `valid_from` (SPEC §11), when the file has the columns `cost_centre`,
    /// `gl_account`, `legal_entity` (any of them) and the row fills one: `None` sets nothing (a blank row never
    /// clears a team's codes: the teams page does that).
    pub codes: Option<crate::billing::FinanceCodes>,
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
    cost_centre: Option<String>,
    gl_account: Option<String>,
    legal_entity: Option<String>,
}

/// Every row checked before anything is written; all errors reported at once, as `row N: field` (N the line).
pub fn parse(body: &str) -> Result<Vec<ImportRow>, Vec<Invalid>> {
    let (rows, errors) = parse_rows(body);
    if errors.is_empty() { Ok(rows) } else { Err(errors) }
}

/// The good rows of a file and the problems of the others (what a preview shows side by side); [`parse`] is
/// this, refusing the file when there is any problem.
pub fn parse_rows(body: &str) -> (Vec<ImportRow>, Vec<Invalid>) {
    let mut reader = csv_reader(body);
    let mut errors = Vec::new();
    let mut rows: Vec<ImportRow> = Vec::new();
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
        let namespace = Namespace::parse("namespace", &row.namespace).map_err(|e| bad("namespace", e.message));
        let team = TeamId::parse("team", &row.team).map_err(|_| {
            bad("team", format!("`{}` is not a team id (a-z, 0-9, `.`, `_`, `-`)", row.team.escape_debug()))
        });
        let mut texts = [None, None];
        for (slot, (field, v)) in texts.iter_mut().zip([("team_name", &row.team_name), ("owner", &row.owner)]) {
            match super::optional_text(field, v.as_deref(), 200) {
                Ok(t) => *slot = t,
                Err(e) => bad(field, e.message),
            }
        }
        let cluster = match row.cluster.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => ClusterName::parse("cluster", c).map(Some).map_err(|e| bad("cluster", e.message)),
            None => Ok(None),
        };
        let valid_from = super::lenient_date("valid_from", &row.valid_from).map_err(|e| bad("valid_from", e.message));
        let codes =
            super::finance_codes(row.cost_centre.as_deref(), row.gl_account.as_deref(), row.legal_entity.as_deref())
                .map(crate::billing::FinanceCodes::non_empty)
                .map_err(|problems| problems.into_iter().for_each(|e| bad(&e.field, e.message)));
        if let (Ok(namespace), Ok(team), Ok(cluster), Ok(valid_from), Ok(codes)) =
            (namespace, team, cluster, valid_from, codes)
            && errors.len() == before
        {
            let [team_name, owner] = texts;
            let row = ImportRow { line, cluster, namespace, team, valid_from, team_name, owner, codes };
            // one team's codes from one day twice: equal codes are one, different ones a contradiction (named by
            // the first code that differs)
            if let Some((earlier, field)) = rows.iter().find_map(|r| {
                let (Some(a), Some(b)) = (&r.codes, &row.codes) else { return None };
                let differs = ["cost_centre", "gl_account", "legal_entity"]
                    .into_iter()
                    .zip(a.cells().into_iter().zip(b.cells()))
                    .find(|(_, (x, y))| x != y)?;
                (r.team == row.team && r.valid_from == row.valid_from).then_some((r, differs.0))
            }) {
                errors.push(Invalid::new(
                    format!("row {line}: {field}"),
                    format!(
                        "gives team {} other finance codes from {} than row {}",
                        row.team, row.valid_from, earlier.line
                    ),
                ));
            }
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
        errors.push(no_rows());
    }
    (rows, errors)
}

// What every CMDB import reads its decoded text with, shared with the queue mappings' file
// (`super::queue_mapping_file`) so that both take the same files and refuse them in the same words.

/// A reader of decoded CSV text: a BOM the decoding left dropped, every field and header trimmed.
pub(crate) fn csv_reader(body: &str) -> csv::Reader<&[u8]> {
    let body = body.strip_prefix('\u{feff}').unwrap_or(body);
    csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(body.as_bytes())
}

/// The refusal of a file longer than [`MAX_IMPORT_ROWS`] rows.
pub(crate) fn too_many_rows() -> Invalid {
    Invalid::new("body", format!("at most {MAX_IMPORT_ROWS} rows per import; split the file"))
}

/// The refusal of a file without a row.
pub(crate) fn no_rows() -> Invalid {
    Invalid::new("body", "no rows (expected a header and at least one row)")
}

/// Whether two rows map the same cluster, namespace and day.
pub fn same_key(a: &ImportRow, b: &ImportRow) -> bool {
    a.cluster == b.cluster && a.namespace == b.namespace && a.valid_from == b.valid_from
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

    #[test]
    fn finance_code_columns_set_a_teams_codes_and_contradictions_are_refused() {
        let text = "namespace,team,valid_from,cost_centre,gl_account,legal_entity\n\
                    a,nlp,2026-11-16,CC-1,6602.01,甲公司\n\
                    b,nlp,2026-11-16,CC-1,6602.01,甲公司\n\
                    c,cv,2026-11-01,,,\n";
        let rows = parse(text).unwrap();
        let c = rows[0].codes.as_ref().unwrap();
        assert_eq!(c.cells(), ["CC-1", "6602.01", "甲公司"]);
        // a row without codes sets none
        assert_eq!(rows[2].codes, None);
        let bad = "namespace,team,valid_from,cost_centre\na,nlp,2026-11-16,CC-1\nb,nlp,2026-11-16,CC-2\nc,cv,2026-11-01,\u{7}x\n";
        let fields: Vec<String> = parse(bad).unwrap_err().into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["row 3: cost_centre", "row 4: cost_centre"]);
    }
}
