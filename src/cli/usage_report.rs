//! The `usage` report as the command line prints it: a table, JSON or CSV of the use case's rows, and the
//! command line's own names for the groupings and the formats.

use crate::db::usage::GroupBy as Grouping;
use crate::usecase::usage::UsageRow;

/// How the report groups stored usage (`--group-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupBy {
    Team,
    Namespace,
    Pod,
    Model,
}

impl From<GroupBy> for Grouping {
    fn from(g: GroupBy) -> Self {
        match g {
            GroupBy::Team => Grouping::Team,
            GroupBy::Namespace => Grouping::Namespace,
            GroupBy::Pod => Grouping::Pod,
            GroupBy::Model => Grouping::Model,
        }
    }
}

/// How the report is printed (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

fn key_columns(group_by: Grouping) -> &'static [&'static str] {
    match group_by {
        Grouping::Team => &["team"],
        Grouping::Namespace => &["namespace"],
        Grouping::Pod => &["namespace", "pod"],
        Grouping::Model => &["gpu_model"],
    }
}

fn keys(row: &UsageRow, group_by: Grouping) -> Vec<String> {
    let v = |o: &Option<String>| o.clone().unwrap_or_default();
    match group_by {
        Grouping::Team => vec![v(&row.team)],
        Grouping::Namespace => vec![v(&row.namespace)],
        Grouping::Pod => vec![v(&row.namespace), v(&row.pod)],
        Grouping::Model => vec![v(&row.gpu_model)],
    }
}

/// Renders the report; the caller prints it.
pub fn render(rows: &[UsageRow], group_by: Grouping, format: Format) -> Result<String, csv::Error> {
    match format {
        Format::Json => Ok(serde_json::to_string_pretty(rows).unwrap_or_else(|_| "[]".into()) + "\n"),
        Format::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            let mut header: Vec<&str> = key_columns(group_by).to_vec();
            header.extend(["gpu_hours", "effective_gpu_hours", "unmetered_gpu_hours", "utilization"]);
            w.write_record(&header)?;
            for r in rows {
                let mut rec = keys(r, group_by);
                rec.extend([
                    r.gpu_hours.to_string(),
                    r.effective_gpu_hours.to_string(),
                    r.unmetered_gpu_hours.to_string(),
                    r.utilization.map(|u| u.to_string()).unwrap_or_default(),
                ]);
                w.write_record(&rec)?;
            }
            let bytes = w.into_inner().map_err(|e| e.into_error())?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        }
        Format::Table => Ok(table(rows, group_by)),
    }
}

fn table(rows: &[UsageRow], group_by: Grouping) -> String {
    let mut header: Vec<String> = key_columns(group_by).iter().map(|s| s.to_string()).collect();
    header.extend(["GPU-hours", "effective", "unmetered", "utilization"].map(String::from));
    let mut lines: Vec<Vec<String>> = vec![header];
    let total = rows
        .iter()
        .fold([0.0f64; 3], |a, r| [a[0] + r.gpu_hours, a[1] + r.effective_gpu_hours, a[2] + r.unmetered_gpu_hours]);
    let fmt_row = |mut k: Vec<String>, g: f64, e: f64, u: f64| {
        let metered = g - u;
        k.extend([
            format!("{g:.3}"),
            format!("{e:.3}"),
            format!("{u:.3}"),
            if metered > 1e-9 { format!("{:.1} %", 100.0 * e / metered) } else { "–".into() },
        ]);
        k
    };
    for r in rows {
        lines.push(fmt_row(keys(r, group_by), r.gpu_hours, r.effective_gpu_hours, r.unmetered_gpu_hours));
    }
    let mut total_keys = vec!["total".to_string()];
    total_keys.resize(key_columns(group_by).len(), String::new());
    lines.push(fmt_row(total_keys, total[0], total[1], total[2]));
    let cols = lines[0].len();
    let widths: Vec<usize> = (0..cols).map(|c| lines.iter().map(|l| l[c].chars().count()).max().unwrap_or(0)).collect();
    let keys_n = key_columns(group_by).len();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        if i == lines.len() - 1 || i == 1 {
            out.push_str(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "));
            out.push('\n');
        }
        let cells: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(c, v)| {
                let pad = widths[c].saturating_sub(v.chars().count());
                if c < keys_n { format!("{v}{}", " ".repeat(pad)) } else { format!("{}{v}", " ".repeat(pad)) }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::usage::UsageTotal;

    fn row() -> UsageRow {
        UsageRow::from(UsageTotal {
            team: None,
            namespace: Some("=cmd".into()),
            pod: Some("p-0".into()),
            gpu_model: None,
            gpu_seconds: 7200.0,
            effective_gpu_seconds: 1800.0,
            unmetered_gpu_seconds: 3600.0,
        })
    }

    #[test]
    fn json_names_the_group_key() {
        let s = render(&[row()], Grouping::Pod, Format::Json).unwrap();
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v[0]["namespace"], "=cmd");
        assert_eq!(v[0]["pod"], "p-0");
        assert_eq!(v[0]["gpu_hours"], 2.0);
        assert!(v[0].get("team").is_none());
    }

    #[test]
    fn csv_and_table() {
        let s = render(&[row()], Grouping::Pod, Format::Csv).unwrap();
        assert_eq!(
            s.lines().next(),
            Some("namespace,pod,gpu_hours,effective_gpu_hours,unmetered_gpu_hours,utilization")
        );
        assert_eq!(s.lines().nth(1), Some("=cmd,p-0,2,0.5,1,0.5"));
        let t = render(&[row()], Grouping::Pod, Format::Table).unwrap();
        assert!(t.contains("50.0 %"), "{t}");
        assert!(t.lines().last().unwrap().starts_with("total"), "{t}");
    }
}
