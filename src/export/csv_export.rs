//! The month's bill lines as CSV for Excel and finance systems: RFC 4180 (CRLF, quoted as needed), UTF-8 with a
//! byte-order mark so Excel shows Chinese names, one row per bill line, and text cells that a spreadsheet would
//! run as a formula neutralised. What differs between layouts ([`super::layout`]) is a [`CsvShape`].

use rust_decimal::Decimal;

use crate::glossary::{self, Lang};
use crate::ledger::{Statement, UnitCostLine};
use crate::money::{Money, RatePerCardHour};

/// Excel, LibreOffice and Google Sheets evaluate a cell starting with one of these as a formula (CSV injection).
const FORMULA_START: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// A text cell made safe: a leading formula character gets a `'` in front (OWASP's advice). Numbers are written
/// by cardhour itself and are never neutralised, so a negative amount stays a number.
pub fn neutralise(text: &str) -> String {
    if text.starts_with(FORMULA_START) { format!("'{text}") } else { text.to_string() }
}

const HEADER: [&str; 17] = [
    "month",
    "status",
    "line_type",
    "original_month",
    "team",
    "team_name",
    "owner",
    "namespace",
    "gpu_model",
    "kind",
    "card_hours",
    "effective_card_hours",
    "unmetered_card_hours",
    "rate",
    "amount",
    "unpriced",
    "policy",
];

/// The columns layout 5 adds where a team of the export has a unit cost of inference: the `unit_cost` rows'
/// figures (one row per team and model served; empty on every other row).
const UNIT_COST_HEADER: [&str; 7] = [
    "model",
    "engine",
    "total_tokens",
    "requests",
    "cost_per_million_tokens",
    "cost_per_thousand_requests",
    "idle_serving_cost",
];

/// The columns an adjustment row fills (its stable id, why, maker, checker), where the statement has an approved
/// adjustment: empty on every other row, absent from a statement without any (its bytes as before).
const ADJUSTMENT_HEADER: [&str; 4] = ["adjustment_id", "reason", "entered_by", "approved_by"];

/// The columns of a line's finance codes (SPEC §11), where a team of the export has codes: empty on the cluster
/// rows and the total row, absent from an export without codes (its bytes as before).
const FINANCE_HEADER: [&str; 3] = ["cost_centre", "gl_account", "legal_entity"];

/// How a layout writes the CSV.
#[derive(Debug, Clone, Copy)]
pub(super) struct CsvShape {
    /// Months (`month`, `original_month`) as the formula `="2026-11"`, which Excel, LibreOffice and Google Sheets
    /// show as the text 2026-11: a bare `2026-11` is read as the date 2026-11-01 (shown `Nov-26`, and saved back
    /// so). Layout 2 on.
    pub months_as_text: bool,
    /// After the teams' rows, the cluster's: `capacity` per GPU model and rate, `unallocated` (offered capacity no
    /// team used), `not_offered` (capacity not offered to workloads) and `platform_kept` (what no team carries:
    /// not offered, plus unallocated unless spread), so Σ usage + Σ unallocated_share + platform_kept = Σ capacity
    /// and Σ usage + unallocated + not_offered = Σ capacity. Layout 2 on, in an export of every team.
    pub cluster_rows: bool,
    /// Layout 4 on: one number format per column kind (card-hours 6 decimals — exactly what is billed —, rates 4,
    /// amounts 2), a `total` row (Σ the teams' totals and card-hours of the export; a reader reconciling the
    /// capacity leaves it out like `restatement`), the `capacity_shortfall` cluster row.
    pub v4: bool,
    /// Layout 5 on: after each team's lines and restatements, a `unit_cost` row per model it served (its unit
    /// cost of inference of the month: tokens, requests, ¥ per million tokens and per thousand requests, idle
    /// serving cost, in [`UNIT_COST_HEADER`]'s columns, no amount: the cost is in the usage lines already). The
    /// columns are there only when a team of the export has such a row, so an export without serving reads as
    /// layout 4's.
    pub v5: bool,
    /// Layout 6 on: a `line_id` column at the end of every row — each line's stable id ([`crate::ledger::line_id`]);
    /// the cluster rows theirs (capacity by model and rate, the others by line type), the total row none.
    pub v6: bool,
    /// Layout 4 on, asked for (`?lang=`): the header and the words (status, line types, kinds, policy, yes/no,
    /// the `unassigned` team, the unknown model) in that language, from the glossary; `None`: the codes.
    pub words: Option<Lang>,
}

impl CsvShape {
    fn month(&self, m: String) -> String {
        if self.months_as_text && !m.is_empty() { format!("=\"{m}\"") } else { m }
    }

    /// A card-hour figure: 6 decimals from layout 4 on, as stored before.
    fn hours(&self, d: Decimal) -> String {
        if self.v4 { format!("{:.6}", d) } else { d.to_string() }
    }

    fn rate(&self, r: Option<RatePerCardHour>) -> String {
        r.map(|r| r.to_string()).unwrap_or_default()
    }

    fn money(&self, m: Money) -> String {
        m.to_string()
    }

    /// A code (`usage`, `whole`, `closed`) or its word in the export's language.
    fn word(&self, family: &str, code: &str) -> String {
        match (self.words, family) {
            (None, _) | (_, "") => code.to_string(),
            (Some(lang), "line") => glossary::line_type(lang, code),
            (Some(lang), "kind") => glossary::kind(lang, code),
            (Some(lang), _) => glossary::term(lang, &format!("{family}.{code}")),
        }
    }

    fn flag(&self, v: bool) -> String {
        self.words.map_or_else(|| v.to_string(), |lang| glossary::yes_no(lang, v))
    }

    fn model(&self, m: &str) -> String {
        self.words.map_or_else(|| m.to_string(), |lang| glossary::model(lang, m))
    }

    fn header(&self, code: &str) -> String {
        self.words.map_or_else(|| code.to_string(), |lang| glossary::term(lang, &format!("term.{code}")))
    }
}

/// The statement's lines (of the teams `include` accepts) as CSV bytes: usage lines, each team's unallocated
/// share (when not zero), restatement lines and (layout 5) unit-cost rows, in team order; then the cluster rows
/// when `shape` asks for them.
pub(super) fn write(st: &Statement, include: impl Fn(&str) -> bool, shape: CsvShape) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::new());
    let month = shape.month(st.month.to_string());
    let status = shape.word("status", &serde_plain(&st.status));
    let mut policy = match shape.words {
        None => format!("{}/{}", serde_plain(&st.bills.policy.mode), serde_plain(&st.bills.policy.unallocated)),
        Some(lang) => format!(
            "{}/{}",
            glossary::mode(lang, st.bills.policy.mode),
            glossary::unallocated(lang, st.bills.policy.unallocated)
        ),
    };
    if let Some(r) = &st.bills.replica_policies {
        policy.push_str(&format!("/replicas:{}", crate::export::present::replica_settings(r)));
    }
    // the replica columns appear only on a statement that carries replica settings or unverified lines, so a
    // month closed before them keeps its bytes
    let lines = || st.bills.teams.iter().flat_map(|t| &t.lines);
    let replica_cols = st.bills.replica_policies.is_some() || lines().any(|l| l.unverified_node);
    let flags = |whole: Option<rust_decimal::Decimal>, unverified: Option<bool>| -> Vec<String> {
        if !replica_cols {
            return Vec::new();
        }
        vec![whole.map(|h| shape.hours(h)).unwrap_or_default(), unverified.map(|u| shape.flag(u)).unwrap_or_default()]
    };
    let teams: Vec<&str> = st.team_ids().into_iter().filter(|t| include(t)).collect();
    // layout 5: the unit-cost columns, where a team of the export served a model
    let unit_cols = shape.v5 && teams.iter().any(|t| !st.unit_cost_of(t).is_empty());
    let unit = |u: Option<&UnitCostLine>| -> Vec<String> {
        if !unit_cols {
            return Vec::new();
        }
        let Some(u) = u else { return vec![String::new(); UNIT_COST_HEADER.len()] };
        let per = |d: Option<Decimal>| d.map(|d| format!("{d:.4}")).unwrap_or_default();
        vec![
            neutralise(&shape.model(&u.model)),
            neutralise(&shape.words.map_or_else(|| u.engine.clone(), |l| crate::export::present::engine(l, &u.engine))),
            u.total_tokens.to_string(),
            u.requests.to_string(),
            per(u.cost_per_million_tokens),
            per(u.cost_per_thousand_requests),
            shape.money(u.idle_cost),
        ]
    };
    // reserved-quota billing: a reservation line's guaranteed (or credited) card-hours and factor, in columns of
    // their own so the card-hours column stays GPU-hours; only in a statement that has such lines
    let res_cols = st.bills.teams.iter().flat_map(|b| &b.lines).any(|l| l.is_reservation());
    let res = |l: Option<&crate::billing::BillLine>| -> Vec<String> {
        match (res_cols, l) {
            (false, _) => Vec::new(),
            (true, Some(l)) if l.is_reservation() => vec![
                l.reserved_card_hours.map(|h| shape.hours(h)).unwrap_or_default(),
                l.reservation_factor.map(|f| format!("{f:.4}")).unwrap_or_default(),
            ],
            (true, _) => vec![String::new(), String::new()],
        }
    };
    // approved adjustments (SPEC §11): their id, reason, maker and checker in columns of their own
    let adj_cols = teams.iter().any(|t| st.adjustments_of(t).next().is_some());
    let adj = |a: Option<&crate::ledger::Adjustment>| -> Vec<String> {
        match (adj_cols, a) {
            (false, _) => Vec::new(),
            (true, None) => vec![String::new(); ADJUSTMENT_HEADER.len()],
            (true, Some(a)) => vec![
                a.line_id(),
                neutralise(&a.reason),
                neutralise(crate::access::actor_name(&a.entered_by)),
                neutralise(a.decided_by.as_deref().map(crate::access::actor_name).unwrap_or("")),
            ],
        }
    };
    // finance codes (SPEC §11): each line's in columns of their own, where a team of the export has codes (an
    // export without any keeps its bytes); a line not computed per day takes its team's codes of the month's end
    let team_codes = |t: &str| st.month_end_codes(t);
    let code_cols = teams.iter().any(|t| {
        team_codes(t).is_some()
            || st.bills.teams.iter().filter(|b| b.team == *t).flat_map(|b| &b.lines).any(|l| l.finance.is_some())
    });
    let codes = |c: Option<&crate::billing::FinanceCodes>| -> Vec<String> {
        match (code_cols, c) {
            (false, _) => Vec::new(),
            (true, None) => vec![String::new(); FINANCE_HEADER.len()],
            (true, Some(c)) => c.cells().iter().map(|s| neutralise(s)).collect(),
        }
    };
    let mut header: Vec<&str> = HEADER.to_vec();
    if replica_cols {
        header.extend(["whole_card_hours", "unverified_node"]);
    }
    if res_cols {
        header.extend(["reserved_card_hours", "reservation_factor"]);
    }
    if unit_cols {
        header.extend(UNIT_COST_HEADER);
    }
    if adj_cols {
        header.extend(ADJUSTMENT_HEADER);
    }
    if code_cols {
        header.extend(FINANCE_HEADER);
    }
    if shape.v6 {
        header.push("line_id");
    }
    let line_id = |id: String| -> Vec<String> { if shape.v6 { vec![id] } else { Vec::new() } };
    w.write_record(header.iter().map(|h| shape.header(h)))?;
    for team in teams.iter().copied() {
        let info = st.teams.get(team);
        let stored_name = info.map_or(team, |i| i.name.as_str());
        let name = neutralise(
            &shape.words.map_or_else(|| stored_name.to_string(), |l| glossary::team_name(l, team, stored_name)),
        );
        let owner = neutralise(info.and_then(|i| i.owner.as_deref()).unwrap_or(""));
        let team_cell = neutralise(team);
        let row = |line_type: &str,
                   original: String,
                   ns: &str,
                   model: &str,
                   kind: &str,
                   nums: [String; 5],
                   unpriced: bool| {
            let [hours, effective, unmetered, rate, amount] = nums;
            [
                month.clone(),
                status.clone(),
                shape.word("line", line_type),
                original,
                team_cell.clone(),
                name.clone(),
                owner.clone(),
                neutralise(ns),
                neutralise(&shape.model(model)),
                neutralise(&shape.word(if kind.is_empty() { "" } else { "kind" }, kind)),
                hours,
                effective,
                unmetered,
                rate,
                amount,
                shape.flag(unpriced),
                policy.clone(),
            ]
        };
        if let Some(bill) = st.bills.teams.iter().find(|b| b.team == team) {
            for l in &bill.lines {
                // a reservation line holds no GPU-hours: its hours are in `reserved_card_hours`
                let gpu = |h: Decimal| if l.is_reservation() { String::new() } else { shape.hours(h) };
                let nums = [
                    gpu(l.card_hours),
                    gpu(l.effective_card_hours),
                    gpu(l.unmetered_card_hours),
                    shape.rate(l.rate),
                    shape.money(l.amount),
                ];
                let (line_type, ns) = match l.is_reservation() {
                    true => (
                        l.kind.as_str(),
                        shape
                            .words
                            .map_or_else(|| l.namespace.clone(), |w| crate::export::present::scope(&l.namespace, w)),
                    ),
                    false => ("usage", l.namespace.clone()),
                };
                let mut r = row(line_type, String::new(), &ns, &l.gpu_model, &l.kind, nums, l.unpriced).to_vec();
                r.extend(flags(l.whole_card_hours, Some(l.unverified_node)));
                r.extend(res(Some(l)));
                r.extend(unit(None));
                r.extend(adj(None));
                r.extend(codes(l.finance.as_ref()));
                r.extend(line_id(crate::ledger::line_id::bill_line(team, l)));
                w.write_record(r)?;
            }
            if !bill.unallocated_share.is_zero() {
                let nums =
                    [String::new(), String::new(), String::new(), String::new(), shape.money(bill.unallocated_share)];
                let mut r = row("unallocated_share", String::new(), "", "", "", nums, false).to_vec();
                r.extend(flags(None, None));
                r.extend(res(None));
                r.extend(unit(None));
                r.extend(adj(None));
                r.extend(codes(team_codes(team)));
                r.extend(line_id(crate::ledger::line_id::unallocated_share(team)));
                w.write_record(r)?;
            }
        }
        for r in st.restatements_of(team) {
            let nums = [
                shape.hours(r.card_hours_delta),
                shape.hours(r.effective_card_hours_delta),
                shape.hours(r.unmetered_card_hours_delta),
                shape.rate(r.rate),
                shape.money(r.amount_delta),
            ];
            let original = shape.month(r.original_month.map(|m| m.to_string()).unwrap_or_default());
            // in words, the share of an earlier month's unallocated cost says so by its line, not by a code
            let ns = if shape.words.is_some() && r.is_unallocated_share() { "" } else { r.namespace.as_str() };
            let kind = if shape.words.is_some() && r.is_unallocated_share() { "" } else { r.kind.as_str() };
            let id = line_id(crate::ledger::line_id::restatement(r));
            let mut r = row("restatement", original, ns, &r.gpu_model, kind, nums, false).to_vec();
            r.extend(flags(None, None));
            r.extend(res(None));
            r.extend(unit(None));
            r.extend(adj(None));
            r.extend(codes(team_codes(team)));
            r.extend(id);
            w.write_record(r)?;
        }
        // approved adjustments: a line each, in the team's total; one correcting an earlier closed month names it
        for a in st.adjustments_of(team) {
            let nums = [String::new(), String::new(), String::new(), String::new(), shape.money(a.amount)];
            let original = if a.month != st.month { shape.month(a.month.to_string()) } else { String::new() };
            let mut r = row("adjustment", original, "", "", "", nums, false).to_vec();
            r.extend(flags(None, None));
            r.extend(res(None));
            r.extend(unit(None));
            r.extend(adj(Some(a)));
            r.extend(codes(team_codes(team)));
            r.extend(line_id(a.line_id()));
            w.write_record(r)?;
        }
        // layout 5: the team's unit cost of inference per model, beside its lines (no amount: not summed)
        for u in st.unit_cost_of(team) {
            let nums = [String::new(), String::new(), String::new(), String::new(), String::new()];
            let mut r = row("unit_cost", String::new(), "", "", "", nums, u.unpriced).to_vec();
            r.extend(flags(None, None));
            // (the reservation columns were missing here: a reserved month with serving pods could not be written)
            r.extend(res(None));
            r.extend(unit(Some(u)));
            r.extend(adj(None));
            r.extend(codes(team_codes(team)));
            r.extend(line_id(crate::ledger::line_id::unit_cost(team, &u.model, &u.engine)));
            w.write_record(r)?;
        }
    }
    if shape.cluster_rows {
        let b = &st.bills;
        let row = |line_type: &str, model: &str, hours: String, rate: String, amount: String, unpriced: bool| {
            let e = String::new;
            [
                month.clone(),
                status.clone(),
                shape.word("line", line_type),
                e(),
                e(),
                e(),
                e(),
                e(),
                neutralise(&shape.model(model)),
                e(),
                hours,
                e(),
                e(),
                rate,
                amount,
                shape.flag(unpriced),
                policy.clone(),
            ]
        };
        // a cluster row's id: its capacity line's, else its line type's (one of each per statement)
        let mut write = |r: [String; 17], id: String| {
            let mut r = r.to_vec();
            r.extend(flags(None, None));
            r.extend(res(None));
            r.extend(unit(None));
            r.extend(adj(None));
            r.extend(codes(None));
            r.extend(line_id(id));
            w.write_record(r)
        };
        for c in &b.capacity {
            let (hours, rate, amount) = (shape.hours(c.card_hours), shape.rate(c.rate), shape.money(c.amount));
            write(row("capacity", &c.gpu_model, hours, rate, amount, c.unpriced), crate::ledger::line_id::capacity(c))?;
        }
        write(
            row("unallocated", "", String::new(), String::new(), b.unallocated.to_string(), false),
            crate::ledger::line_id::cluster("unallocated"),
        )?;
        if let Some(not_offered) = b.not_offered {
            write(
                row("not_offered", "", String::new(), String::new(), not_offered.to_string(), false),
                crate::ledger::line_id::cluster("not_offered"),
            )?;
        }
        write(
            row("platform_kept", "", String::new(), String::new(), b.platform_kept.to_string(), false),
            crate::ledger::line_id::cluster("platform_kept"),
        )?;
        if let Some(over) = b.over_recovery {
            // what whole-card billing recovered above the cards' cost: not part of capacity, its own line
            write(
                row("over_recovery", "", String::new(), String::new(), over.to_string(), false),
                crate::ledger::line_id::cluster("over_recovery"),
            )?;
        }
        if let Some(short) = b.capacity_shortfall.filter(|_| shape.v4) {
            // what usage cost above the counted capacity: teams carry it, nothing is spread of it
            write(
                row("capacity_shortfall", "", String::new(), String::new(), short.to_string(), false),
                crate::ledger::line_id::cluster("capacity_shortfall"),
            )?;
        }
        if let Some(over) = b.over_commitment {
            // what reservations billed above the offered capacity: its own line, nothing spread of it
            write(
                row("over_commitment", "", String::new(), String::new(), over.to_string(), false),
                crate::ledger::line_id::cluster("over_commitment"),
            )?;
        }
    }
    if shape.v4 {
        // the export's total row: Σ the included teams' totals (and card-hours), what they carry this month
        let sums = crate::billing::MonthTotals::of_teams(
            teams
                .iter()
                .map(|t| (st.bills.teams.iter().find(|b| b.team == *t), st.team_restated(t), st.team_adjusted(t))),
        );
        let e = String::new;
        let mut r = vec![
            month.clone(),
            status.clone(),
            shape.word("line", "total"),
            e(),
            e(),
            e(),
            e(),
            e(),
            e(),
            e(),
            shape.hours(sums.card_hours),
            shape.hours(sums.effective_card_hours),
            e(),
            e(),
            shape.money(sums.total),
            e(),
            policy.clone(),
        ];
        r.extend(flags(None, None));
        r.extend(res(None));
        r.extend(unit(None));
        r.extend(adj(None));
        r.extend(codes(None));
        // the total row sums lines: it is none
        r.extend(line_id(String::new()));
        w.write_record(r)?;
    }
    let mut out = "\u{feff}".as_bytes().to_vec();
    out.extend(w.into_inner().map_err(|e| e.into_error())?);
    Ok(out)
}

/// A unit enum's serde name (`open`, `showback`, `kept_by_platform`).
fn serde_plain<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_cells_are_neutralised_text_is_not_changed() {
        assert_eq!(neutralise("=HYPERLINK(\"x\")"), "'=HYPERLINK(\"x\")");
        assert_eq!(neutralise("+1"), "'+1");
        assert_eq!(neutralise("-cmd"), "'-cmd");
        assert_eq!(neutralise("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(neutralise("推荐算法组"), "推荐算法组");
        assert_eq!(neutralise("vision-train"), "vision-train");
    }
}
