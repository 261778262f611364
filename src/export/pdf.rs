//! The month's statement as one PDF for finance: a summary page (cluster totals, every team's total and a bar
//! chart of them) and then one statement (one page or more) per team with its lines, restatements, totals and the
//! rates used.
//!
//! Text is drawn with the font the caller passes in (a CJK font, so Chinese team names render; krilla embeds only
//! the glyphs used). Every number is printed exactly as `Money` / `RatePerCardHour` / the card-hours `Decimal`
//! display it, i.e. the same strings as the API and the CSV export, so `pdftotext` gives them back verbatim. The
//! chart is drawn with `plotters` into an SVG and embedded through `krilla-svg`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use krilla::Document;
use krilla::color::rgb;
use krilla::geom::{PathBuilder, Point, Size};
use krilla::num::NormalizedF32;
use krilla::page::PageSettings;
use krilla::paint::{Fill, Stroke};
use krilla::text::{Font, KrillaGlyph};
use krilla_svg::{SurfaceExt, SvgSettings};
use rust_decimal::prelude::ToPrimitive;

use super::fonts::{ChainMetrics, FontChain};
use crate::billing::TeamBill;
use crate::ledger::frozen::{IdleLine, UtilizationFigures};
use crate::ledger::layout::Layout as LayoutVersion;
use crate::ledger::{MonthStatus, Statement};
use crate::money::{Money, RatePerCardHour};

#[derive(Debug, thiserror::Error)]
pub enum PdfError {
    #[error("the font cannot be read (not an OpenType/TrueType font or collection): {0}")]
    Font(String),
    #[error("the chart cannot be drawn: {0}")]
    Chart(String),
    #[error("the chart's SVG cannot be read: {0}")]
    Svg(String),
    #[error("the PDF cannot be written: {0}")]
    Pdf(String),
}

/// What a statement shows besides the teams' bills: the idle pods of the period's last week and, for global
/// readers only, the finance summary page with the month's utilization. The default shows no cluster-wide figure.
/// A closed month's come from what its close froze ([`super::FrozenExtras`]), never from live data.
#[derive(Debug, Clone, Default)]
pub struct StatementExtras {
    pub idle: Vec<IdleLine>,
    pub utilization: Option<UtilizationFigures>,
    /// Opens with the finance summary: capacity cost, allocated, unallocated, not offered, platform kept,
    /// utilization and every included team's total. Never for a team lead.
    pub finance_summary: bool,
    /// Layout 3 on: each cluster's data coverage of the month.
    pub coverage: Vec<super::Coverage>,
    /// Layout 3 on: the month's budgets of the teams the reader may see.
    pub budgets: BTreeMap<String, Money>,
    /// Layout 3 on: the previous month's totals of those teams.
    pub previous: Option<super::PreviousMonth>,
    /// Layout 3 on, open months: who asked for the draft, and when (a closed month's is its close).
    pub prepared: Option<super::Prepared>,
    /// Layout 4 on: the billing time zone every time prints in (named); `None` prints UTC.
    pub time_zone: Option<chrono_tz::Tz>,
}

// Page geometry: A4 landscape, in points.
pub(super) const PAGE_W: f32 = 842.0;
pub(super) const PAGE_H: f32 = 595.0;
pub(super) const MARGIN: f32 = 40.0;
pub(super) const BOTTOM: f32 = PAGE_H - MARGIN;
/// Teams shown in the summary chart (largest totals first); the table lists them all.
const CHART_TEAMS: usize = 20;

#[derive(Clone, Copy)]
pub(super) enum Align {
    Left,
    Right,
}

pub(super) enum Op {
    Text {
        x: f32,
        y: f32,
        size: f32,
        face: usize,
        text: String,
        glyphs: Vec<KrillaGlyph>,
        gray: u8,
    },
    Rule {
        x0: f32,
        x1: f32,
        y: f32,
        width: f32,
    },
    Svg {
        x: f32,
        y: f32,
        w: f32,
        h: f32,
        tree: Box<usvg::Tree>,
    },
    /// Text turned by `degrees` around its baseline's start (the draft watermark; layout 3 on).
    Turned {
        x: f32,
        y: f32,
        degrees: f32,
        size: f32,
        face: usize,
        text: String,
        glyphs: Vec<KrillaGlyph>,
        gray: u8,
    },
}

/// A display list of pages, laid out top-down with page breaks.
pub(super) struct Layout<'a> {
    pub(super) m: &'a ChainMetrics<'a>,
    pub(super) pages: Vec<Vec<Op>>,
    pub(super) y: f32,
    /// Drawn at the top of a continuation page (e.g. the team's name and "continued").
    pub(super) running_head: String,
}

impl<'a> Layout<'a> {
    pub(super) fn new(m: &'a ChainMetrics<'a>) -> Self {
        Layout { m, pages: Vec::new(), y: MARGIN, running_head: String::new() }
    }

    pub(super) fn new_page(&mut self) {
        self.pages.push(Vec::new());
        self.y = MARGIN;
    }

    /// Starts a new page when `h` points do not fit on this one; returns whether it did.
    pub(super) fn ensure(&mut self, h: f32) -> Result<bool, PdfError> {
        if self.y + h <= BOTTOM {
            return Ok(false);
        }
        self.new_page();
        if !self.running_head.is_empty() {
            let head = self.running_head.clone();
            self.text(MARGIN, self.y + 9.0, 9.0, &head, Align::Left, 110)?;
            self.y += 18.0;
        }
        Ok(true)
    }

    pub(super) fn push(&mut self, op: Op) {
        if self.pages.is_empty() {
            self.pages.push(Vec::new());
        }
        self.pages.last_mut().expect("a page").push(op);
    }

    /// Text with its baseline at `y`; `x` is the left edge, or the right edge for [`Align::Right`].
    pub(super) fn text(
        &mut self,
        x: f32,
        y: f32,
        size: f32,
        text: &str,
        align: Align,
        gray: u8,
    ) -> Result<(), PdfError> {
        if text.is_empty() {
            return Ok(());
        }
        let w = self.m.width(text, size);
        let mut x = match align {
            Align::Left => x,
            Align::Right => x - w,
        };
        // one text operation per face of the chain the characters need
        for run in self.m.runs(text) {
            let advance = run.advance * size;
            self.push(Op::Text { x, y, size, face: run.face, text: run.text, glyphs: run.glyphs, gray });
            x += advance;
        }
        Ok(())
    }

    /// A line of text, advancing the cursor.
    pub(super) fn line(&mut self, size: f32, text: &str) -> Result<(), PdfError> {
        let h = size * 1.5;
        self.ensure(h)?;
        self.text(MARGIN, self.y + size, size, text, Align::Left, 0)?;
        self.y += h;
        Ok(())
    }

    /// Text wrapped to the page's width, a line at a time (at a space where there is one, else between any two
    /// characters: Chinese has no spaces).
    pub(super) fn paragraph(&mut self, size: f32, text: &str) -> Result<(), PdfError> {
        let width = PAGE_W - 2.0 * MARGIN;
        let mut line = String::new();
        for c in text.chars() {
            line.push(c);
            if self.m.width(&line, size) > width {
                let cut = line.rfind(' ').filter(|&i| i > 0).unwrap_or(line.len() - c.len_utf8());
                let rest = line.split_off(cut);
                self.line(size, line.trim_end())?;
                line = rest.trim_start().to_string();
            }
        }
        if !line.is_empty() {
            self.line(size, &line)?;
        }
        Ok(())
    }

    pub(super) fn gap(&mut self, h: f32) {
        self.y += h;
    }

    pub(super) fn rule(&mut self, width: f32) {
        let y = self.y;
        self.push(Op::Rule { x0: MARGIN, x1: PAGE_W - MARGIN, y, width });
    }

    /// One table row: cells in `cols` (left x, width, alignment); a text too wide for its cell is set smaller.
    pub(super) fn row(&mut self, cols: &[Col], cells: &[String], size: f32, gray: u8) -> Result<(), PdfError> {
        let h = size * 1.6;
        self.ensure(h)?;
        let base = self.y + size;
        for (c, text) in cols.iter().zip(cells) {
            let mut s = size;
            let w = self.m.width(text, s);
            if w > c.w - 4.0 && w > 0.0 {
                s = (s * (c.w - 4.0) / w).max(4.0);
            }
            match c.align {
                Align::Left => self.text(c.x, base, s, text, Align::Left, gray)?,
                Align::Right => self.text(c.x + c.w, base, s, text, Align::Right, gray)?,
            }
        }
        self.y += h;
        Ok(())
    }

    /// A header row with a rule under it (repeated after a page break by calling it again).
    pub(super) fn header_row(&mut self, cols: &[Col], names: &[&str]) -> Result<(), PdfError> {
        self.ensure(9.0 * 1.6 * 3.0)?;
        let cells: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        self.row(cols, &cells, 8.0, 90)?;
        self.rule(0.5);
        self.gap(2.0);
        Ok(())
    }

    /// Table rows, repeating the header after each page break.
    pub(super) fn table(&mut self, cols: &[Col], names: &[&str], rows: &[Vec<String>]) -> Result<(), PdfError> {
        self.header_row(cols, names)?;
        for r in rows {
            if self.ensure(9.0 * 1.6)? {
                self.header_row(cols, names)?;
            }
            self.row(cols, r, 9.0, 0)?;
        }
        Ok(())
    }
}

pub(super) struct Col {
    pub(super) x: f32,
    pub(super) w: f32,
    pub(super) align: Align,
}

/// Columns from widths (in points) starting at the left margin.
pub(super) fn cols(spec: &[(f32, Align)]) -> Vec<Col> {
    let mut x = MARGIN;
    spec.iter()
        .map(|&(w, align)| {
            let c = Col { x, w, align };
            x += w;
            c
        })
        .collect()
}

/// The statement of `st` as a PDF: the finance summary (when `extras` asks for it), then the statement of each team
/// `include` accepts (in team order), set in `fonts` (Noto Sans CJK and its fallbacks: a character none has prints
/// as a replacement).
pub fn statement_pdf(
    st: &Statement,
    include: impl Fn(&str) -> bool,
    fonts: &FontChain,
    extras: &StatementExtras,
) -> Result<Vec<u8>, PdfError> {
    let metrics = fonts.metrics()?;

    let teams: Vec<&str> = st.team_ids().into_iter().filter(|t| include(t)).collect();

    let mut lay = Layout::new(&metrics);
    if extras.finance_summary {
        summary(&mut lay, st, &teams, fonts, extras.utilization.as_ref())?;
    }
    for team in &teams {
        team_statement(&mut lay, st, team)?;
        idle_pods(&mut lay, team, &extras.idle)?;
    }
    if lay.pages.is_empty() {
        // a team lead whose teams have no statement this month: say so rather than hand out an empty file
        lay.new_page();
        lay.line(16.0, &format!("GPU cost statement {}", st.month))?;
        lay.line(10.0, "No statement of your teams for this month.")?;
    }

    // Page numbers, bottom right.
    let total = lay.pages.len();
    for n in 0..total {
        let text = format!("{} / {total}", n + 1);
        let mut x = PAGE_W - MARGIN - metrics.width(&text, 8.0);
        for run in metrics.runs(&text) {
            let advance = run.advance * 8.0;
            lay.pages[n].push(Op::Text {
                x,
                y: PAGE_H - 20.0,
                size: 8.0,
                face: run.face,
                text: run.text,
                glyphs: run.glyphs,
                gray: 110,
            });
            x += advance;
        }
    }
    let kfonts = fonts
        .faces
        .iter()
        .map(|f| {
            Font::new(krilla::Data::from(f.data.clone()), f.index)
                .ok_or_else(|| PdfError::Font(format!("face {} of {} cannot be loaded", f.index, f.family)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    render(lay.pages, &kfonts)
}

/// A month closed incomplete says so on every statement: the reason, and on the finance summary what stood in the
/// way (a team's page names no cluster-wide problem).
fn close_override(lay: &mut Layout, st: &Statement, global: bool) -> Result<(), PdfError> {
    let Some(o) = &st.close_override else { return Ok(()) };
    lay.paragraph(10.0, &format!("Closed incomplete, by override of {}. Reason: {}", o.by, o.reason))?;
    if global {
        for b in &o.blockers {
            // layout 1 wrote instants as chrono displays them (`2026-10-31 16:00:00 UTC`), later ones as RFC 3339
            let text = match st.layout {
                LayoutVersion::V1 => b.describe(&|t| t.to_string()),
                _ => b.to_string(),
            };
            lay.paragraph(8.0, &format!("– {text}"))?;
        }
    }
    Ok(())
}

fn status_str(s: MonthStatus) -> &'static str {
    match s {
        MonthStatus::Open => "open",
        MonthStatus::Closed => "closed",
    }
}

/// `showback / kept_by_platform`, the serde names used by the API and the CSV.
fn policy_str(st: &Statement) -> String {
    let plain = |v: serde_json::Value| v.as_str().map(str::to_string).unwrap_or_default();
    let p = &st.bills.policy;
    format!(
        "{} / {}",
        plain(serde_json::to_value(p.mode).unwrap_or_default()),
        plain(serde_json::to_value(p.unallocated).unwrap_or_default())
    )
}

fn period_str(st: &Statement) -> String {
    let from = st.month.first_day();
    let to = st.month.next().first_day().pred_opt().unwrap_or(from);
    format!("{from} – {to}")
}

fn team_name<'s>(st: &'s Statement, team: &'s str) -> &'s str {
    st.teams.get(team).map_or(team, |i| i.name.as_str())
}

fn bill_of<'s>(st: &'s Statement, team: &str) -> Option<&'s TeamBill> {
    st.bills.teams.iter().find(|b| b.team == team)
}

fn summary(
    lay: &mut Layout,
    st: &Statement,
    teams: &[&str],
    fonts: &FontChain,
    utilization: Option<&UtilizationFigures>,
) -> Result<(), PdfError> {
    lay.new_page();
    lay.running_head = format!("GPU cost statement {} — finance summary (continued)", st.month);
    lay.line(16.0, &format!("GPU cost statement {} — finance summary", st.month))?;
    let mut status = format!("Month {}   Period {}   Status {}", st.month, period_str(st), status_str(st.status));
    if let (Some(at), Some(by)) = (st.closed_at, &st.closed_by) {
        status.push_str(&format!(" (closed {} by {by})", at.format("%Y-%m-%d %H:%M UTC")));
    }
    lay.line(10.0, &status)?;
    lay.line(10.0, &format!("Policy {}", policy_str(st)))?;
    close_override(lay, st, true)?;
    lay.gap(6.0);

    let b = &st.bills;
    let c = cols(&[(160.0, Align::Left), (110.0, Align::Right)]);
    lay.header_row(&c, &["Cluster", "Amount (CNY)"])?;
    // layout 2 on (a month closed before offered capacity was recorded has none either): the not-offered line
    let not_offered =
        b.not_offered.filter(|_| st.layout >= LayoutVersion::V2).map(|m| ("Not offered (kept by the platform)", m));
    let cluster = [("Capacity cost", b.capacity_cost), ("Allocated", b.allocated), ("Unallocated", b.unallocated)]
        .into_iter()
        .chain(not_offered)
        .chain([("Platform kept", b.platform_kept)]);
    for (label, m) in cluster {
        lay.row(&c, &[label.to_string(), m.to_string()], 9.0, 0)?;
    }
    if let Some(f) = utilization {
        let pct = |r: Option<f64>| r.map_or_else(|| "–".to_string(), |r| format!("{:.1} %", r * 100.0));
        lay.gap(6.0);
        lay.header_row(&c, &["Utilization", "Month"])?;
        // offered capacity, the allocation rate's base, is shown where it differs from capacity
        // (layout 2 on: a layout-1 PDF prints the rows it printed)
        let offered = (st.layout >= LayoutVersion::V2 && f.not_offered_card_hours > 0.0).then(|| {
            [
                ("Offered card-hours", format!("{:.3}", f.offered_card_hours)),
                ("Not offered card-hours", format!("{:.3}", f.not_offered_card_hours)),
            ]
        });
        for (label, v) in [("Capacity card-hours", format!("{:.3}", f.capacity_card_hours))]
            .into_iter()
            .chain(offered.into_iter().flatten())
            .chain([
                ("GPU-hours", format!("{:.3}", f.gpu_hours)),
                ("Effective GPU-hours", format!("{:.3}", f.effective_gpu_hours)),
                ("Allocation rate", pct(f.allocation_rate)),
                ("Utilization", pct(f.utilization)),
                ("Effective rate", pct(f.effective_rate)),
            ])
        {
            lay.row(&c, &[label.to_string(), v], 9.0, 0)?;
        }
    }
    lay.gap(10.0);

    // The chart: team totals, largest first.
    let mut totals: Vec<(String, f64)> = teams
        .iter()
        .map(|t| (team_name(st, t).to_string(), st.team_total(t).as_decimal().to_f64().unwrap_or(0.0)))
        .collect();
    totals.sort_by(|a, b| b.1.total_cmp(&a.1));
    let shown = totals.len().min(CHART_TEAMS);
    if shown > 0 {
        let title = if shown < totals.len() {
            format!("Team totals (CNY), the {shown} largest of {}", totals.len())
        } else {
            "Team totals (CNY)".to_string()
        };
        let (w, h) = (PAGE_W - 2.0 * MARGIN, 40.0 + 12.0 * shown as f32);
        lay.ensure(h + 15.0)?; // the title stays with its chart
        lay.line(10.0, &title)?;
        let svg = chart_svg(&totals[..shown], w as u32, h as u32)?;
        let tree = svg_tree(&svg, fonts)?;
        let y = lay.y;
        lay.push(Op::Svg { x: MARGIN, y, w, h, tree: Box::new(tree) });
        lay.gap(h + 10.0);
    }

    let c = cols(&[
        (110.0, Align::Left),
        (150.0, Align::Left),
        (110.0, Align::Left),
        (95.0, Align::Right),
        (95.0, Align::Right),
        (85.0, Align::Right),
        (95.0, Align::Right),
    ]);
    let rows: Vec<Vec<String>> = teams
        .iter()
        .map(|t| {
            let info = st.teams.get(*t);
            let bill = bill_of(st, t);
            vec![
                t.to_string(),
                info.map(|i| i.name.clone()).unwrap_or_default(),
                info.and_then(|i| i.owner.clone()).unwrap_or_default(),
                bill.map_or(Money::ZERO, |b| b.allocated).to_string(),
                bill.map_or(Money::ZERO, |b| b.unallocated_share).to_string(),
                st.team_restated(t).to_string(),
                st.team_total(t).to_string(),
            ]
        })
        .collect();
    lay.table(&c, &["Team", "Name", "Owner", "Allocated", "Unallocated share", "Restated", "Total"], &rows)?;
    let sum: Money = teams.iter().map(|t| st.team_total(t)).sum();
    lay.rule(0.5);
    lay.gap(2.0);
    lay.row(
        &c,
        &[
            "Sum of totals".into(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            sum.to_string(),
        ],
        9.0,
        0,
    )?;
    Ok(())
}

fn team_statement(lay: &mut Layout, st: &Statement, team: &str) -> Result<(), PdfError> {
    lay.new_page();
    let name = team_name(st, team);
    lay.running_head = format!("{name} ({team}) — {} (continued)", st.month);
    lay.line(16.0, &format!("{name} — GPU cost statement {}", st.month))?;
    let owner = st.teams.get(team).and_then(|i| i.owner.as_deref()).unwrap_or("—");
    lay.line(10.0, &format!("Team {team}   Owner {owner}"))?;
    lay.line(
        10.0,
        &format!(
            "Month {}   Period {}   Status {}   Policy {}",
            st.month,
            period_str(st),
            status_str(st.status),
            policy_str(st)
        ),
    )?;
    close_override(lay, st, false)?;
    lay.gap(6.0);

    let c = cols(&[
        (90.0, Align::Left),
        (140.0, Align::Left),
        (80.0, Align::Left),
        (65.0, Align::Left),
        (95.0, Align::Right),
        (95.0, Align::Right),
        (90.0, Align::Right),
        (107.0, Align::Right),
    ]);
    let names = ["Line", "Namespace", "GPU model", "Kind", "Card-hours", "Effective", "Rate", "Amount"];
    let rate_str = |r: Option<RatePerCardHour>| r.map_or_else(|| "unpriced".to_string(), |r| r.to_string());
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut rates: BTreeMap<String, BTreeSet<Option<RatePerCardHour>>> = BTreeMap::new();
    let bill = bill_of(st, team);
    if let Some(b) = bill {
        for l in &b.lines {
            rates.entry(l.gpu_model.clone()).or_default().insert(l.rate);
            rows.push(vec![
                "usage".into(),
                l.namespace.clone(),
                l.gpu_model.clone(),
                l.kind.clone(),
                l.card_hours.to_string(),
                l.effective_card_hours.to_string(),
                rate_str(l.rate),
                l.amount.to_string(),
            ]);
        }
        if !b.unallocated_share.is_zero() {
            rows.push(vec![
                "share".into(),
                "(unallocated share)".into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                b.unallocated_share.to_string(),
            ]);
        }
    }
    for r in st.restatements_of(team) {
        if !r.is_unallocated_share() {
            rates.entry(r.gpu_model.clone()).or_default().insert(r.rate);
        }
        let label = r.original_month.map_or_else(|| "restated".to_string(), |m| format!("restated {m}"));
        rows.push(vec![
            label,
            r.namespace.clone(),
            r.gpu_model.clone(),
            r.kind.clone(),
            r.card_hours_delta.to_string(),
            r.effective_card_hours_delta.to_string(),
            if r.is_unallocated_share() { String::new() } else { rate_str(r.rate) },
            r.amount_delta.to_string(),
        ]);
    }
    lay.table(&c, &names, &rows)?;
    lay.rule(0.5);
    lay.gap(4.0);

    let t = cols(&[(200.0, Align::Left), (110.0, Align::Right)]);
    let mut totals = Vec::new();
    if let Some(b) = bill {
        totals.push(("Card-hours".to_string(), b.card_hours.to_string()));
        totals.push(("Effective card-hours".to_string(), b.effective_card_hours.to_string()));
        totals.push(("Unmetered card-hours".to_string(), b.unmetered_card_hours.to_string()));
        totals.push(("Allocated (CNY)".to_string(), b.allocated.to_string()));
        totals.push(("Unallocated share (CNY)".to_string(), b.unallocated_share.to_string()));
    }
    totals.push(("Restated (CNY)".to_string(), st.team_restated(team).to_string()));
    totals.push(("Total (CNY)".to_string(), st.team_total(team).to_string()));
    lay.gap(6.0);
    for (label, v) in totals {
        lay.row(&t, &[label, v], 9.0, 0)?;
    }

    if !rates.is_empty() {
        lay.gap(10.0);
        lay.line(10.0, "Rates used (CNY per card-hour)")?;
        let r = cols(&[(160.0, Align::Left), (400.0, Align::Left)]);
        let rows: Vec<Vec<String>> = rates
            .into_iter()
            .map(|(model, set)| {
                let list: Vec<String> = set.into_iter().map(rate_str).collect();
                vec![model, list.join(", ")]
            })
            .collect();
        lay.table(&r, &["GPU model", "Rates"], &rows)?;
    }
    Ok(())
}

/// The team's idle pods (the idle-waste list), after its statement.
fn idle_pods(lay: &mut Layout, team: &str, idle: &[IdleLine]) -> Result<(), PdfError> {
    let mine: Vec<&IdleLine> = idle.iter().filter(|p| p.team == team).collect();
    if mine.is_empty() {
        return Ok(());
    }
    lay.gap(10.0);
    lay.line(10.0, "Idle pods (utilization under the threshold while holding GPU memory)")?;
    let c = cols(&[
        (100.0, Align::Left),
        (160.0, Align::Left),
        (90.0, Align::Left),
        (55.0, Align::Right),
        (55.0, Align::Right),
        (55.0, Align::Right),
        (110.0, Align::Right),
        (110.0, Align::Right),
    ]);
    let rows: Vec<Vec<String>> = mine
        .iter()
        .map(|p| {
            vec![
                p.namespace.clone(),
                p.pod.clone(),
                p.gpu_model.clone(),
                format!("{:.3}", p.cards_held),
                format!("{:.1}", p.hours_held),
                format!("{:.1} %", p.average_utilization * 100.0),
                p.idle_spend.to_string(),
                p.monthly_projection.map_or_else(|| "ended".to_string(), |m| m.to_string()),
            ]
        })
        .collect();
    lay.table(
        &c,
        &["Namespace", "Pod", "GPU model", "Cards", "Hours", "Util.", "Spent idle (CNY)", "Projected/month"],
        &rows,
    )
}

/// A horizontal bar chart of `(label, value)` as SVG, drawn with plotters.
fn chart_svg(bars: &[(String, f64)], w: u32, h: u32) -> Result<String, PdfError> {
    use plotters::prelude::*;
    let chart_err = |e: &dyn std::fmt::Display| PdfError::Chart(e.to_string());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| chart_err(&e))?;
        let max = bars.iter().map(|b| b.1).fold(0.0_f64, f64::max);
        let min = bars.iter().map(|b| b.1).fold(0.0_f64, f64::min);
        let hi = if max > 0.0 { max * 1.08 } else { 1.0 };
        let n = bars.len() as i32;
        let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
        let mut chart = ChartBuilder::on(&root)
            .margin(6)
            .x_label_area_size(24)
            .y_label_area_size(170)
            .build_cartesian_2d(min * 1.08..hi, (0..n).into_segmented())
            .map_err(|e| chart_err(&e))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(bars.len())
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get((n - 1 - *i) as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .x_label_formatter(&|v| format!("{v:.0}"))
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(|e| chart_err(&e))?;
        let color = RGBColor(52, 101, 164);
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
                // Segment 0 is at the bottom: put the largest total at the top.
                let i = n - 1 - i as i32;
                let mut r =
                    Rectangle::new([(0.0, SegmentValue::Exact(i)), (*v, SegmentValue::Exact(i + 1))], color.filled());
                r.set_margin(2, 2, 0, 0);
                r
            }))
            .map_err(|e| chart_err(&e))?;
        root.present().map_err(|e| chart_err(&e))?;
    }
    Ok(svg)
}

/// The SVG parsed by usvg with the statement's fonts (the primary as its sans-serif, the fallbacks for the rest).
pub(super) fn svg_tree(svg: &str, fonts: &FontChain) -> Result<usvg::Tree, PdfError> {
    let mut db = usvg::fontdb::Database::new();
    for face in &fonts.faces {
        let source: Arc<dyn AsRef<[u8]> + Send + Sync> = face.data.clone();
        db.load_font_source(usvg::fontdb::Source::Binary(source));
    }
    db.set_sans_serif_family(fonts.family());
    let opt =
        usvg::Options { font_family: fonts.family().to_string(), fontdb: Arc::new(db), ..usvg::Options::default() };
    usvg::Tree::from_str(svg, &opt).map_err(|e| PdfError::Svg(e.to_string()))
}

pub(super) fn render(pages: Vec<Vec<Op>>, fonts: &[Font]) -> Result<Vec<u8>, PdfError> {
    let mut doc = Document::new();
    let settings = PageSettings::from_wh(PAGE_W, PAGE_H).expect("A4 is a valid page size");
    for ops in pages {
        let mut page = doc.start_page_with(settings.clone());
        let mut s = page.surface();
        for op in ops {
            match op {
                Op::Text { x, y, size, face, text, glyphs, gray } => {
                    s.set_fill(Some(fill(gray)));
                    s.set_stroke(None);
                    s.draw_glyphs(Point::from_xy(x, y), &glyphs, fonts[face].clone(), &text, size, false);
                }
                Op::Rule { x0, x1, y, width } => {
                    let mut pb = PathBuilder::new();
                    pb.move_to(x0, y);
                    pb.line_to(x1, y);
                    if let Some(path) = pb.finish() {
                        s.set_fill(None);
                        s.set_stroke(Some(Stroke {
                            paint: rgb::Color::new(120, 120, 120).into(),
                            width,
                            ..Stroke::default()
                        }));
                        s.draw_path(&path);
                        s.set_stroke(None);
                    }
                }
                Op::Turned { x, y, degrees, size, face, text, glyphs, gray } => {
                    s.push_transform(&krilla::geom::Transform::from_translate(x, y));
                    s.push_transform(&krilla::geom::Transform::from_rotate(degrees));
                    s.set_fill(Some(fill(gray)));
                    s.set_stroke(None);
                    s.draw_glyphs(Point::from_xy(0.0, 0.0), &glyphs, fonts[face].clone(), &text, size, false);
                    s.pop();
                    s.pop();
                }
                Op::Svg { x, y, w, h, tree } => {
                    let size = Size::from_wh(w, h).ok_or_else(|| PdfError::Svg("empty chart".into()))?;
                    s.push_transform(&krilla::geom::Transform::from_translate(x, y));
                    s.draw_svg(&tree, size, SvgSettings::default())
                        .ok_or_else(|| PdfError::Svg("krilla-svg could not draw the chart".into()))?;
                    s.pop();
                }
            }
        }
        s.finish();
        page.finish();
    }
    doc.finish().map_err(|e| PdfError::Pdf(format!("{e:?}")))
}

fn fill(gray: u8) -> Fill {
    Fill { paint: rgb::Color::new(gray, gray, gray).into(), opacity: NormalizedF32::ONE, rule: Default::default() }
}
