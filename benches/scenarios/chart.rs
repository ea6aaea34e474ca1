//! A small SVG line-chart writer for figures against the number of processes: a grid of
//! panels, each with a logarithmic x axis (the fleet sizes) and a linear or logarithmic y
//! axis. Hand-written so the bench needs no plotting dependency.

use std::fmt::Write as _;

/// One line of a panel: its label, colour, and `(x, y)` points (x > 0).
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub(crate) label: String,
    pub(crate) colour: &'static str,
    pub(crate) points: Vec<(f64, f64)>,
}

/// One chart of the grid.
#[derive(Debug, Clone)]
pub(crate) struct Panel {
    pub(crate) title: String,
    /// A logarithmic y axis (for figures that grow by orders of magnitude).
    pub(crate) log_y: bool,
    /// A horizontal dashed line: the target, if the figure has one.
    pub(crate) target: Option<f64>,
    pub(crate) series: Vec<Series>,
}

const PANEL_W: f64 = 380.0;
const PANEL_H: f64 = 250.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 62.0;

/// The SVG document of `panels` in a grid `columns` wide under `title`.
pub(crate) fn svg(title: &str, panels: &[Panel], columns: usize) -> String {
    let columns = columns.max(1);
    let rows = panels.len().div_ceil(columns);
    #[allow(clippy::cast_precision_loss)]
    let (width, height) = (PANEL_W * columns as f64, PANEL_H * rows as f64 + 36.0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#,
        width / 2.0,
        escape(title)
    );
    for (at, panel) in panels.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let (x0, y0) = (
            (at % columns) as f64 * PANEL_W,
            (at / columns) as f64 * PANEL_H + 36.0,
        );
        draw(&mut out, panel, x0, y0);
    }
    out.push_str("</svg>\n");
    out
}

/// Maps a value onto one axis: logarithmic or linear between `low` and `high`.
#[derive(Debug, Clone, Copy)]
struct Axis {
    low: f64,
    high: f64,
    log: bool,
}

impl Axis {
    fn fraction(self, value: f64) -> f64 {
        let (low, high, value) = if self.log {
            (
                self.low.log10(),
                self.high.log10(),
                value.max(self.low).log10(),
            )
        } else {
            (self.low, self.high, value)
        };
        if high > low {
            (value - low) / (high - low)
        } else {
            0.5
        }
    }
}

fn draw(out: &mut String, panel: &Panel, x0: f64, y0: f64) {
    let points: Vec<(f64, f64)> = panel
        .series
        .iter()
        .flat_map(|series| series.points.iter().copied())
        .filter(|&(x, y)| x > 0.0 && y.is_finite() && (!panel.log_y || y > 0.0))
        .collect();
    let (plot_w, plot_h) = (PANEL_W - LEFT - RIGHT, PANEL_H - TOP - BOTTOM);
    let (left, top) = (x0 + LEFT, y0 + TOP);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text>"#,
        x0 + PANEL_W / 2.0,
        y0 + 16.0,
        escape(&panel.title)
    );
    let _ = writeln!(
        out,
        r##"<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>"##
    );
    if points.is_empty() {
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle" fill="gray">no figures</text>"#,
            left + plot_w / 2.0,
            top + plot_h / 2.0
        );
        return;
    }
    let mut xs: Vec<f64> = points.iter().map(|&(x, _)| x).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let x_axis = Axis {
        low: xs[0] / 1.3,
        high: xs[xs.len() - 1] * 1.3,
        log: true,
    };
    let ys = points
        .iter()
        .map(|&(_, y)| y)
        .chain(panel.target.filter(|t| !panel.log_y || *t > 0.0));
    let (y_min, y_max) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
        (lo.min(y), hi.max(y))
    });
    let y_axis = if panel.log_y {
        Axis {
            low: 10_f64.powf(y_min.log10().floor()),
            high: 10_f64.powf(y_max.log10().ceil().max(y_min.log10().floor() + 1.0)),
            log: true,
        }
    } else {
        Axis {
            low: 0.0_f64.min(y_min),
            high: if y_max > 0.0 { y_max * 1.1 } else { 1.0 },
            log: false,
        }
    };
    let to_x = |x: f64| left + x_axis.fraction(x) * plot_w;
    let to_y = |y: f64| top + plot_h - y_axis.fraction(y) * plot_h;
    for &x in &xs {
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{1}" stroke="#eee"/><text x="{0:.1}" y="{2}" text-anchor="middle">{3}</text>"##,
            to_x(x),
            top + plot_h,
            top + plot_h + 14.0,
            x
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle" fill="gray">processes (P)</text>"#,
        left + plot_w / 2.0,
        top + plot_h + 28.0
    );
    for tick in y_ticks(y_axis) {
        let _ = writeln!(
            out,
            r##"<line x1="{left}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#eee"/><text x="{2}" y="{3:.1}" text-anchor="end">{4}</text>"##,
            to_y(tick),
            left + plot_w,
            left - 4.0,
            to_y(tick) + 4.0,
            short(tick)
        );
    }
    if let Some(target) = panel.target {
        let _ = writeln!(
            out,
            r##"<line x1="{left}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#2a2" stroke-dasharray="5,4"/><text x="{2}" y="{3:.1}" text-anchor="end" fill="#2a2">target</text>"##,
            to_y(target),
            left + plot_w,
            left + plot_w - 3.0,
            to_y(target) - 3.0
        );
    }
    for (at, series) in panel.series.iter().enumerate() {
        let mut drawn: Vec<(f64, f64)> = series
            .points
            .iter()
            .copied()
            .filter(|&(x, y)| x > 0.0 && y.is_finite() && (!panel.log_y || y > 0.0))
            .collect();
        drawn.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = drawn
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", to_x(x), to_y(y)))
            .collect();
        if path.len() > 1 {
            let _ = writeln!(
                out,
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>"#,
                path.join(" "),
                series.colour
            );
        }
        for &(x, y) in &drawn {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"><title>{}: P = {x}, {}</title></circle>"#,
                to_x(x),
                to_y(y),
                series.colour,
                escape(&series.label),
                short(y)
            );
        }
        #[allow(clippy::cast_precision_loss)]
        let legend_y = y0 + PANEL_H - 16.0;
        #[allow(clippy::cast_precision_loss)]
        let legend_x = left + at as f64 * (plot_w / panel.series.len().max(1) as f64);
        let _ = writeln!(
            out,
            r#"<rect x="{legend_x:.1}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{legend_y:.1}">{}</text>"#,
            legend_y - 9.0,
            series.colour,
            legend_x + 13.0,
            escape(&series.label)
        );
    }
}

/// Grid lines: each power of ten on a logarithmic axis, five even steps on a linear one.
fn y_ticks(axis: Axis) -> Vec<f64> {
    if axis.log {
        let mut ticks = Vec::new();
        let mut tick = axis.low;
        while tick <= axis.high * 1.000_001 {
            ticks.push(tick);
            tick *= 10.0;
        }
        ticks
    } else {
        (0..=5)
            .map(|step| axis.low + (axis.high - axis.low) * f64::from(step) / 5.0)
            .collect()
    }
}

/// A tick or value label: few digits, whatever the magnitude.
fn short(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude == 0.0 {
        "0".to_owned()
    } else if magnitude >= 100.0 {
        format!("{value:.0}")
    } else if magnitude >= 1.0 {
        format!("{value:.1}")
    } else if magnitude >= 0.01 {
        format!("{value:.2}")
    } else {
        format!("{value:.1e}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
