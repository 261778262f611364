//! The month's bill lines as CSV for Excel and finance systems: RFC 4180 (CRLF, quoted as needed), UTF-8 with a
//! byte-order mark so Excel shows Chinese names, one row per bill line, and text cells that a spreadsheet would
//! run as a formula neutralised.

use crate::ledger::Statement;

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

/// The statement's lines (of the teams `include` accepts) as CSV bytes: usage lines, each team's unallocated
/// share (when not zero) and restatement lines, in team order.
pub fn bill_csv(st: &Statement, include: impl Fn(&str) -> bool) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::new());
    w.write_record(HEADER)?;
    let month = st.month.to_string();
    let status = serde_plain(&st.status);
    let policy = format!("{}/{}", serde_plain(&st.bills.policy.mode), serde_plain(&st.bills.policy.unallocated));
    let teams: Vec<&str> = st.team_ids().into_iter().filter(|t| include(t)).collect();
    for team in teams {
        let info = st.teams.get(team);
        let name = neutralise(info.map_or(team, |i| i.name.as_str()));
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
                line_type.to_string(),
                original,
                team_cell.clone(),
                name.clone(),
                owner.clone(),
                neutralise(ns),
                neutralise(model),
                neutralise(kind),
                hours,
                effective,
                unmetered,
                rate,
                amount,
                unpriced.to_string(),
                policy.clone(),
            ]
        };
        if let Some(bill) = st.bills.teams.iter().find(|b| b.team == team) {
            for l in &bill.lines {
                let nums = [
                    l.card_hours.to_string(),
                    l.effective_card_hours.to_string(),
                    l.unmetered_card_hours.to_string(),
                    l.rate.map(|r| r.to_string()).unwrap_or_default(),
                    l.amount.to_string(),
                ];
                w.write_record(row("usage", String::new(), &l.namespace, &l.gpu_model, &l.kind, nums, l.unpriced))?;
            }
            if !bill.unallocated_share.is_zero() {
                let nums =
                    [String::new(), String::new(), String::new(), String::new(), bill.unallocated_share.to_string()];
                w.write_record(row("unallocated_share", String::new(), "", "", "", nums, false))?;
            }
        }
        for r in st.restatements_of(team) {
            let nums = [
                r.card_hours_delta.to_string(),
                r.effective_card_hours_delta.to_string(),
                r.unmetered_card_hours_delta.to_string(),
                r.rate.map(|x| x.to_string()).unwrap_or_default(),
                r.amount_delta.to_string(),
            ];
            let original = r.original_month.map(|m| m.to_string()).unwrap_or_default();
            w.write_record(row("restatement", original, &r.namespace, &r.gpu_model, &r.kind, nums, false))?;
        }
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
