//! Charts as server-rendered SVG (plotters): a column chart of amounts over months, a heatmap of shares
//! (rows × columns, e.g. team × day), and lines over days (one per series, e.g. ¥ per million tokens per model).
//! No script: the page carries the drawing.

use plotters::prelude::*;

/// A drawing that failed is left out (the numbers are in the table beside it) and logged.
fn or_empty(r: Result<String, String>) -> String {
    r.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "chart not drawn");
        String::new()
    })
}

/// Columns of `(label, value)`, each labelled with `shown` (its value as the page prints it).
pub fn columns(bars: &[(String, f64, String)], w: u32, h: u32) -> String {
    or_empty(draw_columns(bars, w, h))
}

fn draw_columns(bars: &[(String, f64, String)], w: u32, h: u32) -> Result<String, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let max = bars.iter().map(|b| b.1).fold(0.0_f64, f64::max);
        let hi = if max > 0.0 { max * 1.2 } else { 1.0 };
        let n = bars.len() as i32;
        let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(70)
            .build_cartesian_2d((0..n).into_segmented(), 0.0..hi)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(bars.len())
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_labels(6)
            // small amounts keep their cents, so neighbouring ticks never print alike
            .y_label_formatter(&|v| if hi >= 10.0 { format!("{v:.0}") } else { format!("{v:.2}") })
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(|e| err(&e))?;
        let color = RGBColor(31, 95, 191);
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let i = i as i32;
                let mut r =
                    Rectangle::new([(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), b.1)], color.filled());
                r.set_margin(0, 0, 4, 4);
                r
            }))
            .map_err(|e| err(&e))?;
        use plotters::style::text_anchor::{HPos, Pos, VPos};
        let style = TextStyle::from(("sans-serif", 9).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
        chart
            .draw_series(
                bars.iter()
                    .enumerate()
                    .map(|(i, b)| Text::new(b.2.clone(), (SegmentValue::CenterOf(i as i32), b.1), style.clone())),
            )
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}

/// A heatmap: `rows` × `cols`, each cell a share 0–1 (`None`: nothing measured) — light for low, dark for high —
/// with its legend underneath: the colour of every 10 % from 0 to 100 %, and the grey of nothing measured (`–`).
pub fn heatmap(rows: &[String], cols: &[String], cells: &[Vec<Option<f64>>]) -> String {
    or_empty(draw_heatmap(rows, cols, cells))
}

/// The colour of a share: white (0) to deep blue (1); grey for nothing measured.
fn shade(v: Option<f64>) -> RGBColor {
    match v {
        None => RGBColor(230, 230, 230),
        Some(v) => {
            let v = v.clamp(0.0, 1.0);
            let mix = |a: f64, b: f64| (a + (b - a) * v).round() as u8;
            RGBColor(mix(247.0, 8.0), mix(251.0, 48.0), mix(255.0, 107.0))
        }
    }
}

/// The legend's steps (tenths, 0–100 %) and the width of each swatch.
const LEGEND_STEPS: u32 = 10;
const SWATCH_W: u32 = 28;

fn draw_heatmap(rows: &[String], cols: &[String], cells: &[Vec<Option<f64>>]) -> Result<String, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let (cell_w, cell_h, left, top) = (22u32, 20u32, 140u32, 30u32);
    let grid_bottom = top + cell_h * rows.len().max(1) as u32;
    // the legend: 11 swatches, a gap, the grey one
    let legend_w = 4 + SWATCH_W * (LEGEND_STEPS + 1) + 16 + SWATCH_W + 10;
    let w = (left + cell_w * cols.len().max(1) as u32 + 10).max(legend_w);
    let h = grid_bottom + 14 + 14 + 16 + 6;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let label = ("sans-serif", 10).into_font().color(&BLACK);
        for (j, c) in cols.iter().enumerate() {
            let x = (left + cell_w * j as u32 + 4) as i32;
            root.draw(&Text::new(c.clone(), (x, 10), label.clone())).map_err(|e| err(&e))?;
        }
        for (i, r) in rows.iter().enumerate() {
            let y = (top + cell_h * i as u32) as i32;
            root.draw(&Text::new(r.clone(), (4, y + 5), label.clone())).map_err(|e| err(&e))?;
            for (j, v) in cells.get(i).into_iter().flatten().enumerate() {
                let x = (left + cell_w * j as u32) as i32;
                let rect = Rectangle::new([(x, y), (x + cell_w as i32 - 1, y + cell_h as i32 - 1)], shade(*v).filled());
                root.draw(&rect).map_err(|e| err(&e))?;
            }
        }
        let y = (grid_bottom + 14) as i32;
        let swatch =
            |x: i32, v: Option<f64>| Rectangle::new([(x, y), (x + SWATCH_W as i32 - 2, y + 13)], shade(v).filled());
        let edge = |x: i32| Rectangle::new([(x, y), (x + SWATCH_W as i32 - 2, y + 13)], RGBColor(200, 200, 200));
        for step in 0..=LEGEND_STEPS {
            let x = (4 + SWATCH_W * step) as i32;
            let v = f64::from(step) / f64::from(LEGEND_STEPS);
            root.draw(&swatch(x, Some(v))).map_err(|e| err(&e))?;
            root.draw(&edge(x)).map_err(|e| err(&e))?;
            root.draw(&Text::new(format!("{} %", step * 10), (x, y + 17), label.clone())).map_err(|e| err(&e))?;
        }
        let x = (4 + SWATCH_W * (LEGEND_STEPS + 1) + 16) as i32;
        root.draw(&swatch(x, None)).map_err(|e| err(&e))?;
        root.draw(&Text::new("–".to_string(), (x + 10, y + 17), label.clone())).map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}

/// The lines' colours, in the order the series come (then again from the first).
const LINE_COLOURS: [RGBColor; 10] = [
    RGBColor(31, 95, 191),
    RGBColor(230, 120, 20),
    RGBColor(44, 150, 44),
    RGBColor(200, 40, 40),
    RGBColor(130, 90, 180),
    RGBColor(140, 86, 75),
    RGBColor(210, 100, 170),
    RGBColor(110, 110, 110),
    RGBColor(160, 160, 30),
    RGBColor(20, 160, 180),
];

/// How wide a series' line is drawn: twice the axes', so a reader (and a test, by this mark) tells them apart.
const LINE_WIDTH: u32 = 2;

/// The mark of a series' line in the SVG (`<polyline … stroke-width="2" points=…`).
#[cfg(test)]
pub const LINE_MARK: &str = r#"stroke-width="2" points"#;

/// How many legend entries share a row under a line chart.
const LEGEND_COLUMNS: usize = 3;

/// Lines over `days` (their labels), one per `(name, values)` series, each value `None` where the series has no
/// point that day (the line breaks there); every point marked, so a lone day shows; a legend of the names, each
/// in its line's colour, underneath.
pub fn lines(days: &[String], series: &[(String, Vec<Option<f64>>)], w: u32, h: u32) -> String {
    or_empty(draw_lines(days, series, w, h))
}

fn draw_lines(days: &[String], series: &[(String, Vec<Option<f64>>)], w: u32, h: u32) -> Result<String, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let legend_rows = series.len().div_ceil(LEGEND_COLUMNS).max(1) as u32;
    let legend_h = 18 * legend_rows + 8;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h + legend_h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let (plot, legend) = root.split_vertically(h);
        let max = series.iter().flat_map(|(_, v)| v.iter().flatten()).copied().fold(0.0_f64, f64::max);
        let hi = if max > 0.0 { max * 1.15 } else { 1.0 };
        let n = days.len().max(1);
        let mut chart = ChartBuilder::on(&plot)
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..hi)
            .map_err(|e| err(&e))?;
        // the value lines only, without the fine ones between them: the series stand out
        let light = RGBAColor(0, 0, 0, 0.0);
        // at most about a dozen day labels, each on a day (never between two)
        let step = n.div_ceil(12).max(1);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(light)
            .x_labels(n.min(12 * step) + 1)
            .x_label_formatter(&|v| {
                let i = v.round();
                if (v - i).abs() > 1e-6 || i < 0.0 {
                    return String::new();
                }
                let i = i as usize;
                if i.is_multiple_of(step) { days.get(i).cloned().unwrap_or_default() } else { String::new() }
            })
            .y_labels(6)
            .y_label_formatter(&|v| {
                if hi >= 100.0 {
                    format!("{v:.0}")
                } else if hi >= 1.0 {
                    format!("{v:.2}")
                } else {
                    format!("{v:.4}")
                }
            })
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(|e| err(&e))?;
        for (k, (_, values)) in series.iter().enumerate() {
            let colour = LINE_COLOURS[k % LINE_COLOURS.len()];
            let style = ShapeStyle::from(&colour).stroke_width(LINE_WIDTH);
            // runs of consecutive days with a value: a day without one breaks the line
            let mut run: Vec<(f64, f64)> = Vec::new();
            let mut runs: Vec<Vec<(f64, f64)>> = Vec::new();
            for (i, v) in values.iter().enumerate() {
                match v {
                    Some(v) if v.is_finite() => run.push((i as f64, *v)),
                    _ => runs.push(std::mem::take(&mut run)),
                }
            }
            runs.push(run);
            chart
                .draw_series(runs.into_iter().filter(|r| r.len() > 1).map(|r| PathElement::new(r, style)))
                .map_err(|e| err(&e))?;
            chart
                .draw_series(values.iter().enumerate().filter_map(|(i, v)| {
                    v.filter(|v| v.is_finite()).map(|v| Circle::new((i as f64, v), 3, colour.filled()))
                }))
                .map_err(|e| err(&e))?;
        }
        let label = ("sans-serif", 11).into_font().color(&BLACK);
        let column_w = (w as i32 - 80) / LEGEND_COLUMNS as i32;
        for (k, (name, _)) in series.iter().enumerate() {
            let colour = LINE_COLOURS[k % LINE_COLOURS.len()];
            let x = 78 + column_w * (k % LEGEND_COLUMNS) as i32;
            let y = 4 + 18 * (k / LEGEND_COLUMNS) as i32;
            legend.draw(&Rectangle::new([(x, y + 5), (x + 18, y + 8)], colour.filled())).map_err(|e| err(&e))?;
            legend.draw(&Text::new(name.clone(), (x + 24, y + 1), label.clone())).map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_and_cells_are_drawn() {
        let svg = columns(
            &[("2026-10".into(), 100.0, "¥100.00".into()), ("2026-11".into(), 50.0, "¥50.00".into())],
            400,
            200,
        );
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("¥100.00") && svg.contains("2026-11"));
        let svg = heatmap(&["vision".into()], &["01".into(), "02".into()], &[vec![Some(1.0), None]]);
        // the full share is deep blue, the unmeasured cell grey
        assert!(svg.contains("#08306B"), "{svg}");
        assert!(svg.contains("#E6E6E6"), "{svg}");
        // the legend: every tenth from 0 to 100 %, each in its colour (a cell of 50 % is drawn in the 50 % swatch's)
        for pct in (0..=100).step_by(10) {
            assert!(svg.contains(&format!("\n{pct} %\n</text>")), "legend lacks {pct} %: {svg}");
        }
        let half = shade(Some(0.5));
        let hex = format!("#{:02X}{:02X}{:02X}", half.0, half.1, half.2);
        assert!(svg.contains(&hex), "{hex}: {svg}");
        assert!(svg.contains("\n–\n</text>"), "the legend names the unmeasured grey");
    }

    #[test]
    fn lines_break_where_a_day_has_no_value_and_name_their_series() {
        let days: Vec<String> = ["10-01", "10-02", "10-03", "10-04"].map(String::from).to_vec();
        let svg = lines(
            &days,
            &[
                ("qwen-7b".into(), vec![Some(2.0), Some(3.0), None, Some(4.0)]),
                ("llama-70b".into(), vec![None, None, Some(9.5), None]),
            ],
            600,
            240,
        );
        assert!(svg.starts_with("<svg"), "{svg}");
        // the legend names both series; the day labels are there
        assert!(svg.contains("qwen-7b") && svg.contains("llama-70b"), "{svg}");
        assert!(svg.contains("10-01") && svg.contains("10-04"), "{svg}");
        // one line (days 1–2; day 4 stands alone), four points: a lone day is a point, not a line (the axes are
        // polylines too, one pixel wide)
        assert_eq!(svg.matches(LINE_MARK).count(), 1, "{svg}");
        assert_eq!(svg.matches("<circle").count(), 4, "{svg}");
        // the first series in the first colour, the second in the second
        assert!(svg.contains("#1F5FBF") && svg.contains("#E67814"), "{svg}");
        // nothing to draw is still a chart (an empty frame), not an error
        assert!(lines(&days, &[], 600, 240).starts_with("<svg"));
    }

    /// The axis' tick labels of a column chart, bottom up.
    fn ticks(svg: &str) -> Vec<String> {
        svg.split("<text")
            .filter_map(|t| t.split('>').nth(1)?.split('<').next())
            .map(|l| l.trim().to_string())
            .collect()
    }

    #[test]
    fn small_amounts_keep_distinct_ticks() {
        let zero =
            columns(&[("2026-11".into(), 0.0, "¥0.00".into()), ("2026-12".into(), 0.0, "¥0.00".into())], 400, 200);
        let labels = ticks(&zero);
        let numeric: Vec<&String> = labels.iter().filter(|l| l.parse::<f64>().is_ok()).collect();
        assert!(numeric.len() >= 3, "{labels:?}");
        for (i, l) in numeric.iter().enumerate() {
            assert!(numeric[i + 1..].iter().all(|o| o != l), "tick {l} twice: {labels:?}");
        }
        let small = columns(&[("2026-11".into(), 3.5, "¥3.50".into())], 400, 200);
        assert!(ticks(&small).iter().any(|l| l == "1.00" || l == "2.00"), "{:?}", ticks(&small));
    }
}
