//! The PDF of layouts 3 and later: a [`StatementView`] set on A4 landscape pages with the page machinery of the earlier
//! layouts ([`super::pdf`]), which stays unchanged for the months frozen under them. A heading is kept with its
//! table (never the last line of a page), an open month carries its draft watermark on every page, the chart
//! labels its bars with their amounts.

use krilla::text::Font;
use rust_decimal::prelude::ToPrimitive;

use super::fonts::FontChain;
use super::pdf::{Align, BOTTOM, Layout, MARGIN, Op, PAGE_H, PAGE_W, PdfError, cols, render, svg_tree};
use super::present::yuan;
use super::view::{Block, StatementView, Table};
use crate::money::Money;

const ROW: f32 = 9.0 * 1.6;

/// The view as PDF bytes.
pub fn view_pdf(view: &StatementView, fonts: &FontChain) -> Result<Vec<u8>, PdfError> {
    let metrics = fonts.metrics()?;
    let mut lay = Layout::new(&metrics);
    // A draft's watermark is drawn first, under everything: its charts leave their background unpainted so the
    // word shows through them. A closed month (no watermark) keeps its white chart background, byte for byte.
    let background = if view.watermark.is_some() { Background::Clear } else { Background::White };
    for section in &view.sections {
        lay.new_page();
        // drawn by `ensure` at the top of each continuation page of this section
        lay.running_head = section.running_head.clone();
        for block in &section.blocks {
            block_pdf(&mut lay, block, fonts, background)?;
        }
    }
    let total = lay.pages.len();
    for n in 0..total {
        let text = view.page_of.replace("{n}", &(n + 1).to_string()).replace("{total}", &total.to_string());
        let x = PAGE_W - MARGIN - metrics.width(&text, 8.0);
        push_text(&mut lay, n, x, PAGE_H - 20.0, 8.0, &text, 110);
        if let Some(w) = &view.watermark {
            // a banner in the top margin, and the word large and light across the page
            push_text(&mut lay, n, MARGIN, 24.0, 9.0, w, 120);
            let word = w.split([' ', '·']).next().unwrap_or(w);
            for run in metrics.runs(word) {
                lay.pages[n].insert(
                    0,
                    Op::Turned {
                        x: PAGE_W * 0.30,
                        y: PAGE_H * 0.78,
                        degrees: -28.0,
                        size: 110.0,
                        face: run.face,
                        text: run.text,
                        glyphs: run.glyphs,
                        gray: 232,
                    },
                );
            }
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

fn push_text(lay: &mut Layout, page: usize, x: f32, y: f32, size: f32, text: &str, gray: u8) {
    let mut x = x;
    for run in lay.m.runs(text) {
        let advance = run.advance * size;
        lay.pages[page].push(Op::Text { x, y, size, face: run.face, text: run.text, glyphs: run.glyphs, gray });
        x += advance;
    }
}

/// Whether a chart paints its background.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Background {
    White,
    Clear,
}

fn block_pdf(lay: &mut Layout, block: &Block, fonts: &FontChain, background: Background) -> Result<(), PdfError> {
    match block {
        Block::Title(t) => lay.line(15.0, t)?,
        Block::Line(t) => lay.line(10.0, t)?,
        Block::Note { text, warning } => {
            lay.gap(2.0);
            lay.paragraph(if *warning { 10.0 } else { 8.0 }, text)?;
        }
        Block::Table(t) => table_pdf(lay, t)?,
        Block::Chart { title, bars } => {
            let (w, h) = (PAGE_W - 2.0 * MARGIN, 40.0 + 14.0 * bars.len() as f32);
            lay.gap(8.0);
            lay.ensure(h + 20.0)?; // the title stays with its chart
            lay.line(10.0, title)?;
            let svg = chart_svg(bars, w as u32, h as u32, background)?;
            let tree = svg_tree(&svg, fonts)?;
            let y = lay.y;
            lay.push(Op::Svg { x: MARGIN, y, w, h, tree: Box::new(tree) });
            lay.gap(h + 6.0);
        }
        Block::Approval(lines) => {
            lay.gap(14.0);
            // the sign-off block is never split over two pages
            lay.ensure(lines.len() as f32 * 10.0 * 2.2 + 4.0)?;
            for l in lines {
                lay.line(10.0, l)?;
                lay.gap(6.0);
            }
        }
    }
    Ok(())
}

/// A table with its heading: the heading, the header row and the first rows (up to 3) go on one page.
fn table_pdf(lay: &mut Layout, t: &Table) -> Result<(), PdfError> {
    let c = cols(
        &t.columns.iter().map(|c| (c.width, if c.right { Align::Right } else { Align::Left })).collect::<Vec<_>>(),
    );
    let names: Vec<&str> = t.columns.iter().map(|c| c.name.as_str()).collect();
    let first = t.rows.len().min(3) as f32 + f32::from(u8::from(t.total.is_some()));
    let heading_h = if t.heading.is_some() { 8.0 + 10.0 * 1.5 } else { 0.0 };
    lay.gap(4.0);
    if lay.y + heading_h + 8.0 * 1.6 + 2.5 + first * ROW > BOTTOM {
        lay.ensure(f32::MAX)?;
    }
    if let Some(h) = &t.heading {
        lay.gap(8.0);
        lay.line(10.0, h)?;
    }
    lay.table(&c, &names, &t.rows)?;
    if let Some(total) = &t.total {
        if lay.ensure(ROW + 3.0)? {
            lay.header_row(&c, &names)?;
        }
        lay.rule(0.5);
        lay.gap(2.0);
        lay.row(&c, total, 9.0, 0)?;
    }
    Ok(())
}

/// A horizontal bar chart of team totals as SVG, each bar labelled with its amount (¥), drawn with plotters.
fn chart_svg(bars: &[(String, Money)], w: u32, h: u32, background: Background) -> Result<String, PdfError> {
    use plotters::prelude::*;
    let chart_err = |e: &dyn std::fmt::Display| PdfError::Chart(e.to_string());
    let values: Vec<f64> = bars.iter().map(|b| b.1.as_decimal().to_f64().unwrap_or(0.0)).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        if background == Background::White {
            root.fill(&WHITE).map_err(|e| chart_err(&e))?;
        }
        let max = values.iter().copied().fold(0.0_f64, f64::max);
        let min = values.iter().copied().fold(0.0_f64, f64::min);
        // room right of the longest bar for its label
        let hi = if max > 0.0 { max * 1.25 } else { 1.0 };
        let n = bars.len() as i32;
        let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
        let mut chart = ChartBuilder::on(&root)
            .margin(6)
            .x_label_area_size(24)
            .y_label_area_size(170)
            .build_cartesian_2d(min * 1.25..hi, (0..n).into_segmented())
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
            .draw_series(values.iter().enumerate().map(|(i, v)| {
                // segment 0 is at the bottom: the largest total at the top
                let i = n - 1 - i as i32;
                let mut r =
                    Rectangle::new([(0.0, SegmentValue::Exact(i)), (*v, SegmentValue::Exact(i + 1))], color.filled());
                r.set_margin(2, 2, 0, 0);
                r
            }))
            .map_err(|e| chart_err(&e))?;
        use plotters::style::text_anchor::{HPos, Pos, VPos};
        let style = TextStyle::from(("sans-serif", 10).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        chart
            .draw_series(bars.iter().zip(&values).enumerate().map(|(i, ((_, m), v))| {
                let i = n - 1 - i as i32;
                Text::new(format!(" {}", yuan(*m)), (v.max(0.0), SegmentValue::CenterOf(i)), style.clone())
            }))
            .map_err(|e| chart_err(&e))?;
        root.present().map_err(|e| chart_err(&e))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drafts_chart_lets_its_watermark_show_through() {
        let bars = vec![("vision".to_string(), Money::from_decimal(rust_decimal::Decimal::new(123_456, 2)))];
        let white = chart_svg(&bars, 600, 80, Background::White).unwrap();
        let clear = chart_svg(&bars, 600, 80, Background::Clear).unwrap();
        assert!(white.to_uppercase().contains("FILL=\"#FFFFFF\""), "{white}");
        assert!(!clear.to_uppercase().contains("FILL=\"#FFFFFF\""), "{clear}");
        assert!(clear.contains("¥1,234.56"), "the bar keeps its label: {clear}");
    }
}
