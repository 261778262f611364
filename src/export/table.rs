//! Reports and lists as files for finance: the idle list, the low-utilization report, the month's utilization,
//! the efficiency tiers and oversubscription, each a [`ReportTable`] written as CSV (RFC 4180, UTF-8 with a BOM,
//! text cells neutralised against formulas) or as an Excel workbook (real number, date and text cells). One number
//! format per column kind, in both: money 2 decimals, card-hours 3 (measured, as the JSON rounds them), rates 4,
//! ratios 4 (0–1), memory 1. Times are in the billing time zone: RFC 3339 with its offset in the CSV, the zone
//! named in the header; in the workbook, text with the zone named. Headers and words come from the glossary: the
//! CSV writes the field names and codes unless a language is asked for; the workbook is always in one language,
//! its field names in a hidden row below the header (for programs that read it).

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use rust_xlsxwriter::{Format, Workbook, XlsxError};

use crate::glossary::{self, Lang};
use crate::money::{Money, RatePerCardHour};

/// One cell of a report.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Data (a name, an id): never translated, neutralised in the CSV.
    Text(String),
    /// A code of a glossary family (`kind`, `tier`, `line`…): the code in a CSV of codes, its word otherwise.
    Code(&'static str, String),
    Money(Money),
    /// Measured card-hours (or cards), 3 decimals.
    Hours(f64),
    Rate(Option<RatePerCardHour>),
    /// A share 0–1, 4 decimals; none when it cannot be measured.
    Ratio(Option<f64>),
    /// MiB, 1 decimal.
    Mib(f64),
    Count(i64),
    /// An exact figure printed with this many decimals (2 or 4: a unit cost in ¥); none when it has no divisor.
    Decimal(Option<Decimal>, u32),
    Day(NaiveDate),
    Time(DateTime<Utc>),
    Flag(bool),
    Empty,
}

/// A column: its field name (the CSV's header of codes, the workbook's hidden row) and its glossary term.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub field: &'static str,
    /// A glossary key (`term.cluster`).
    pub term: &'static str,
}

pub const fn column(field: &'static str, term: &'static str) -> Column {
    Column { field, term }
}

/// A report as a table: what it is (a glossary key of its title), facts about it (the window, the rule), its
/// columns, rows and total row.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportTable {
    /// A glossary key: the workbook's sheet and title.
    pub title: &'static str,
    /// (glossary key, value) lines over the workbook's table: the window, the rule, what a total is.
    pub facts: Vec<(&'static str, Cell)>,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Cell>>,
    /// The total row (its first cell the word "total"), when the report adds up.
    pub total: Option<Vec<Cell>>,
}

/// How a file writes its cells.
#[derive(Debug, Clone, Copy)]
pub struct Writing {
    /// `None`: field names and codes (a CSV for programs); else the glossary's words in that language.
    pub words: Option<Lang>,
    /// The billing time zone its times are written in.
    pub tz: chrono_tz::Tz,
}

impl Writing {
    fn header(&self, c: &Column) -> String {
        match self.words {
            None => c.field.to_string(),
            Some(lang) => glossary::term(lang, c.term),
        }
    }

    /// A cell as CSV text.
    fn text(&self, cell: &Cell) -> String {
        match cell {
            Cell::Text(t) => super::neutralise(t),
            Cell::Code(family, code) => match self.words {
                None => code.clone(),
                Some(lang) => coded(lang, family, code),
            },
            Cell::Money(m) => m.to_string(),
            Cell::Hours(h) => fixed(*h, 3),
            Cell::Rate(r) => r.map(|r| r.to_string()).unwrap_or_default(),
            Cell::Ratio(r) => r.map_or_else(String::new, |r| fixed(r, 4)),
            Cell::Mib(m) => fixed(*m, 1),
            Cell::Count(n) => n.to_string(),
            Cell::Decimal(d, dp) => d.map_or_else(String::new, |d| {
                let mut d = d.round_dp_with_strategy(*dp, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
                d.rescale(*dp);
                d.to_string()
            }),
            Cell::Day(d) => d.to_string(),
            Cell::Time(t) => t.with_timezone(&self.tz).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            Cell::Flag(v) => self.words.map_or_else(|| v.to_string(), |lang| glossary::yes_no(lang, *v)),
            Cell::Empty => String::new(),
        }
    }
}

/// A code of `family` in words (`kind`, `tier`, `line`, `anomaly` have their own families in the glossary).
fn coded(lang: Lang, family: &str, code: &str) -> String {
    match family {
        "kind" => glossary::kind(lang, code),
        "tier" => glossary::tier(lang, code),
        "line" => glossary::line_type(lang, code),
        "model" => glossary::model(lang, code),
        "team" => glossary::team_name(lang, code, code),
        other => glossary::term(lang, &format!("{other}.{code}")),
    }
}

/// `x` with `dp` decimals, rounded half away from zero; a non-finite value is an empty cell.
fn fixed(x: f64, dp: u32) -> String {
    match Decimal::from_f64_retain(x) {
        Some(d) => {
            let mut r = d.round_dp_with_strategy(dp, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
            r.rescale(dp);
            if r.is_zero() { Decimal::new(0, dp).to_string() } else { r.to_string() }
        }
        None => String::new(),
    }
}

/// The table as CSV bytes: the header (field names, or the words of `w.words`), the rows, the total row.
pub fn report_csv(t: &ReportTable, w: Writing) -> Result<Vec<u8>, csv::Error> {
    let mut out = csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::new());
    let header: Vec<String> = t
        .columns
        .iter()
        .map(|c| {
            // a time column names its zone
            let h = w.header(c);
            if t.rows.iter().chain(t.total.iter()).any(|r| matches!(r.get(index(t, c)), Some(Cell::Time(_)))) {
                format!("{h} ({})", w.tz.name())
            } else {
                h
            }
        })
        .collect();
    out.write_record(&header)?;
    for r in t.rows.iter().chain(t.total.iter()) {
        out.write_record(r.iter().map(|c| w.text(c)))?;
    }
    let mut bytes = "\u{feff}".as_bytes().to_vec();
    bytes.extend(out.into_inner().map_err(|e| e.into_error())?);
    Ok(bytes)
}

fn index(t: &ReportTable, c: &Column) -> usize {
    t.columns.iter().position(|x| x == c).unwrap_or(0)
}

/// The tables as an Excel workbook in `lang`, a sheet each: its title, facts, header (the field names in a
/// hidden row below it), rows and total row. Deterministic bytes: fixed properties, no time in the file but the
/// cells'.
pub fn report_xlsx(tables: &[ReportTable], lang: Lang, tz: chrono_tz::Tz) -> Result<Vec<u8>, XlsxError> {
    let w = Writing { words: Some(lang), tz };
    let bold = Format::new().set_bold();
    let formats = [
        Format::new().set_num_format("#,##0.00"),
        Format::new().set_num_format("#,##0.000"),
        Format::new().set_num_format("#,##0.0000"),
        Format::new().set_num_format("0.0%"),
        Format::new().set_num_format("#,##0.0"),
        Format::new().set_num_format("yyyy-mm-dd"),
    ];
    let [money, hours, rate, ratio, mib, day] = &formats;
    let mut wb = Workbook::new();
    let epoch = NaiveDate::from_ymd_opt(2000, 1, 1).expect("a date").and_time(Default::default()).and_utc();
    wb.set_properties(&rust_xlsxwriter::DocProperties::new().set_author("cardhour").set_creation_datetime(&epoch));
    let mut used: Vec<String> = Vec::new();
    for t in tables {
        let ws = wb.add_worksheet();
        let mut name: String = glossary::term(lang, t.title).chars().take(28).collect();
        while used.contains(&name) {
            name.push('~');
        }
        used.push(name.clone());
        ws.set_name(&name)?;
        ws.write_string_with_format(0, 0, glossary::term(lang, t.title), &bold)?;
        let mut row = 1;
        for (key, value) in t.facts.iter().chain([("term.time_zone", Cell::Text(tz.name().to_string()))].iter()) {
            ws.write_string_with_format(row, 0, glossary::term(lang, key), &bold)?;
            write_cell(ws, row, 1, value, &w, money, hours, rate, ratio, mib, day)?;
            row += 1;
        }
        row += 1;
        for (c, col) in t.columns.iter().enumerate() {
            ws.write_string_with_format(row, c as u16, w.header(col), &bold)?;
            ws.write_string(row + 1, c as u16, col.field)?;
        }
        ws.set_row_hidden(row + 1)?;
        ws.set_freeze_panes(row + 2, 0)?;
        row += 2;
        for r in &t.rows {
            for (c, cell) in r.iter().enumerate() {
                write_cell(ws, row, c as u16, cell, &w, money, hours, rate, ratio, mib, day)?;
            }
            row += 1;
        }
        if let Some(total) = &t.total {
            for (c, cell) in total.iter().enumerate() {
                match cell {
                    Cell::Text(s) | Cell::Code(_, s) if c == 0 => {
                        ws.write_string_with_format(row, 0, w.text(&Cell::Code("line", s.clone())), &bold)?;
                    }
                    _ => write_cell(ws, row, c as u16, cell, &w, money, hours, rate, ratio, mib, day)?,
                }
            }
        }
        ws.set_column_width(0, 22)?;
    }
    wb.save_to_buffer()
}

#[allow(clippy::too_many_arguments)]
fn write_cell(
    ws: &mut rust_xlsxwriter::Worksheet,
    row: u32,
    col: u16,
    cell: &Cell,
    w: &Writing,
    money: &Format,
    hours: &Format,
    rate: &Format,
    ratio: &Format,
    mib: &Format,
    day: &Format,
) -> Result<(), XlsxError> {
    let number = |x: f64| x.is_finite().then_some(x);
    match cell {
        Cell::Text(t) => ws.write_string(row, col, t).map(|_| ()),
        Cell::Money(m) => ws.write_with_format(row, col, m.as_decimal(), money).map(|_| ()),
        Cell::Hours(h) => match number(*h) {
            Some(h) => ws.write_number_with_format(row, col, h, hours).map(|_| ()),
            None => Ok(()),
        },
        Cell::Rate(Some(r)) => ws.write_with_format(row, col, r.as_decimal(), rate).map(|_| ()),
        Cell::Ratio(Some(r)) => match number(*r) {
            Some(r) => ws.write_number_with_format(row, col, r, ratio).map(|_| ()),
            None => Ok(()),
        },
        Cell::Mib(m) => match number(*m) {
            Some(m) => ws.write_number_with_format(row, col, m, mib).map(|_| ()),
            None => Ok(()),
        },
        Cell::Count(n) => ws.write_number(row, col, *n as f64).map(|_| ()),
        Cell::Decimal(Some(d), dp) => {
            let d = d.round_dp_with_strategy(*dp, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
            ws.write_with_format(row, col, d, if *dp <= 2 { money } else { rate }).map(|_| ())
        }
        Cell::Decimal(None, _) => Ok(()),
        Cell::Day(d) => ws.write_datetime_with_format(row, col, *d, day).map(|_| ()),
        Cell::Time(t) => ws.write_string(row, col, super::present::when(*t, w.tz)).map(|_| ()),
        Cell::Rate(None) | Cell::Ratio(None) | Cell::Empty => Ok(()),
        Cell::Code(..) | Cell::Flag(_) => ws.write_string(row, col, w.text(cell)).map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal_macros::dec;

    fn table() -> ReportTable {
        ReportTable {
            title: "report.idle",
            facts: vec![],
            columns: vec![
                column("pod", "term.pod"),
                column("kind", "term.kind"),
                column("hours", "term.hours"),
                column("amount", "term.amount"),
                column("to", "term.window_to"),
                column("running", "term.still_running"),
            ],
            rows: vec![vec![
                Cell::Text("=cmd".into()),
                Cell::Code("kind", "hami".into()),
                Cell::Hours(1.0 / 3.0),
                Cell::Money(Money::round_fen(dec!(12.5))),
                Cell::Time("2026-11-03T06:00:00Z".parse().unwrap()),
                Cell::Flag(true),
            ]],
            total: Some(vec![
                Cell::Code("line", "total".into()),
                Cell::Empty,
                Cell::Empty,
                Cell::Money(Money::round_fen(dec!(12.5))),
                Cell::Empty,
                Cell::Empty,
            ]),
        }
    }

    #[test]
    fn a_csv_of_codes_or_of_words_one_format_per_kind() {
        let tz = chrono_tz::Asia::Shanghai;
        let codes = String::from_utf8(report_csv(&table(), Writing { words: None, tz }).unwrap()).unwrap();
        assert_eq!(
            codes,
            "\u{feff}pod,kind,hours,amount,to (Asia/Shanghai),running\r\n\
             '=cmd,hami,0.333,12.50,2026-11-03T14:00:00+08:00,true\r\n\
             total,,,12.50,,\r\n"
        );
        let zh = String::from_utf8(report_csv(&table(), Writing { words: Some(Lang::Zh), tz }).unwrap()).unwrap();
        assert!(zh.contains("HAMi 虚拟卡") && zh.contains(",是\r\n") && zh.contains("合计,"), "{zh}");
        assert!(zh.lines().next().unwrap().contains("资源类型"), "{zh}");
        assert_eq!(fixed(-0.00001, 3), "0.000");
        assert_eq!(fixed(f64::NAN, 3), "");
    }
}
