//! `matrix.svg`: the matrix at a glance.
//!
//! Why these two plots: grouped bars per mount option set answer "what does each strategy cost
//! on this filesystem configuration" (bar = median seconds until the data was stable, whisker =
//! its min–max, black tick = median until the unpacker exited, so the gap is the flush the tool
//! left behind); with two or more `--synthetic` sizes, a log-log plot of time against number of
//! files shows how each strategy scales, where per-file flushing shows as a steeper line. A
//! failed cell is marked "failed" and never drawn as a bar.

use super::matrix::{Column, Matrix, RowResult};
use super::stats::Spread;
use super::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

const WIDTH: u32 = 1200;
const PANEL_HEIGHT: u32 = 440;

/// Writes the chart to `path`.
pub fn write_svg(matrix: &Matrix, path: &Path) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| Error::Output {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let bars = bar_panels(matrix);
    let scaling = scaling_panels(matrix);
    let panels = (bars.len() + scaling.len()).max(1);
    let root = SVGBackend::new(path, (WIDTH, PANEL_HEIGHT * panels as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let areas = root.split_evenly((panels, 1));
    for (area, (title, rows)) in areas.iter().zip(&bars) {
        draw_bars(&root, area, title, rows, &matrix.columns).map_err(|e| err(&e))?;
    }
    for (area, (title, series)) in areas[bars.len()..].iter().zip(&scaling) {
        draw_scaling(area, title, series).map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))
}

type Panel<'a> = (String, Vec<&'a RowResult>);

/// One panel per workload, filesystem, scenario and cache; its groups are the option sets.
fn bar_panels(matrix: &Matrix) -> Vec<Panel<'_>> {
    let mut panels: Vec<Panel> = Vec::new();
    let mut keys = Vec::new();
    for row in &matrix.rows {
        let key = (row.row.workload, &row.row.filesystem, row.row.scenario, row.row.cache);
        match keys.iter().position(|k| *k == key) {
            Some(i) => panels[i].1.push(row),
            None => {
                keys.push(key);
                let title = format!(
                    "{}: {} {}, {} cache — seconds until stable (bar: median, whisker: min–max, tick: median until exited)",
                    row.workload,
                    row.row.filesystem,
                    row.row.scenario.name(),
                    row.row.cache.name()
                );
                panels.push((title, vec![row]));
            }
        }
    }
    panels
}

/// Per tool, (files, median seconds until stable) points.
type Series = Vec<(String, Vec<(f64, f64)>)>;

/// With two or more synthetic sizes: one panel per filesystem, scenario, option set and cache.
fn scaling_panels(matrix: &Matrix) -> Vec<(String, Series)> {
    let files = |row: &RowResult| matrix.environment.workloads[row.row.workload].synthetic_files;
    let sizes = matrix.environment.workloads.iter().filter(|w| w.synthetic_files.is_some()).count();
    if sizes < 2 {
        return Vec::new();
    }
    let mut panels: Vec<(String, Series)> = Vec::new();
    let mut keys = Vec::new();
    for row in matrix.rows.iter().filter(|r| files(r).is_some()) {
        let key = (&row.row.filesystem, row.row.scenario, &row.row.mount_options, row.row.cache);
        let i = match keys.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                keys.push(key);
                let title = format!(
                    "scaling: {} {}, -o {}, {} cache — median seconds until stable against files in the package",
                    row.row.filesystem,
                    row.row.scenario.name(),
                    row.row.mount_options,
                    row.row.cache.name()
                );
                panels.push((
                    title,
                    matrix.columns.iter().map(|c| (c.name.clone(), Vec::new())).collect(),
                ));
                keys.len() - 1
            }
        };
        for (series, cell) in panels[i].1.iter_mut().zip(&row.cells) {
            if let (true, Some(n), Some(s)) = (cell.is_clean(), files(row), cell.stable) {
                series.1.push((n as f64, s.median));
            }
        }
    }
    for (_, series) in &mut panels {
        for (_, points) in series.iter_mut() {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
    }
    // A panel whose every cell failed has nothing to plot; the tables say why.
    panels.retain(|(_, series)| series.iter().any(|(_, points)| !points.is_empty()));
    panels
}

fn label_font(size: u32) -> TextStyle<'static> {
    ("sans-serif", size).into_font().color(&BLACK)
}

type DrawResult = std::result::Result<
    (),
    DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>,
>;

/// The series' legend, in the top left corner of either kind of chart.
fn draw_legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(label_font(12))
        .draw()
}

fn draw_bars(
    root: &DrawingArea<SVGBackend, Shift>,
    area: &DrawingArea<SVGBackend, Shift>,
    title: &str,
    rows: &[&RowResult],
    columns: &[Column],
) -> DrawResult {
    let groups = rows.len() as f64;
    let tools = columns.len().max(1) as f64;
    let top = rows
        .iter()
        .flat_map(|r| &r.cells)
        .filter(|c| c.is_clean())
        .filter_map(|c| c.stable.map(|s| s.max))
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.25;
    let mut chart = ChartBuilder::on(area)
        .caption(title, label_font(15))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..groups, 0.0..top)?;
    chart.configure_mesh().disable_x_mesh().x_labels(0).y_desc("seconds").draw()?;
    let slot = 0.8 / tools;
    let x_of = |g: usize, t: usize| g as f64 + 0.1 + t as f64 * slot;
    for (t, column) in columns.iter().enumerate() {
        let color = Palette99::pick(t).to_rgba();
        let clean = |g: usize| rows[g].cells.get(t).filter(|c| c.is_clean());
        let stable = |g: usize| clean(g).and_then(|c| c.stable);
        chart
            .draw_series((0..rows.len()).filter_map(|g| {
                let s = stable(g)?;
                Some(Rectangle::new(
                    [(x_of(g, t), 0.0), (x_of(g, t) + slot * 0.85, s.median)],
                    color.filled(),
                ))
            }))?
            .label(column.name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        let whisker = |g: usize, s: Spread| {
            let (x0, x1) = (x_of(g, t), x_of(g, t) + slot * 0.85);
            let mid = (x0 + x1) / 2.0;
            let cap = slot * 0.2;
            [
                PathElement::new(vec![(mid, s.min), (mid, s.max)], BLACK),
                PathElement::new(vec![(mid - cap, s.min), (mid + cap, s.min)], BLACK),
                PathElement::new(vec![(mid - cap, s.max), (mid + cap, s.max)], BLACK),
            ]
        };
        chart.draw_series(
            (0..rows.len()).filter_map(|g| stable(g).map(|s| whisker(g, s))).flatten(),
        )?;
        chart.draw_series((0..rows.len()).filter_map(|g| {
            let e = clean(g)?.exit?;
            Some(PathElement::new(
                vec![(x_of(g, t), e.median), (x_of(g, t) + slot * 0.85, e.median)],
                BLACK.stroke_width(3),
            ))
        }))?;
        chart.draw_series(
            (0..rows.len())
                .filter(|&g| rows[g].cells.get(t).is_some_and(|c| !c.is_clean()))
                .map(|g| Text::new("failed", (x_of(g, t), top * 0.03), label_font(10))),
        )?;
    }
    draw_legend(&mut chart)?;
    for (g, row) in rows.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(g as f64 + 0.5, 0.0));
        let text = format!("-o {}", row.row.mount_options);
        root.draw(&Text::new(
            text,
            (px, py + 8),
            label_font(13).pos(Pos::new(HPos::Center, VPos::Top)),
        ))?;
    }
    Ok(())
}

fn draw_scaling(area: &DrawingArea<SVGBackend, Shift>, title: &str, series: &Series) -> DrawResult {
    let points = || series.iter().flat_map(|(_, p)| p.iter().copied());
    let (xmin, xmax) = points().fold((f64::MAX, 1.0f64), |(lo, hi), (x, _)| (lo.min(x), hi.max(x)));
    let (ymin, ymax) =
        points().fold((f64::MAX, 1e-3f64), |(lo, hi), (_, y)| (lo.min(y), hi.max(y)));
    let (xmin, ymin) = (xmin.min(xmax).max(1.0), ymin.min(ymax).max(1e-5));
    let mut chart = ChartBuilder::on(area)
        .caption(title, label_font(15))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(
            (xmin / 2.0..xmax * 2.0).log_scale(),
            (ymin / 2.0..ymax * 2.0).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("files in the package")
        .y_desc("seconds until stable")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()?;
    for (t, (name, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(t).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    draw_legend(&mut chart)?;
    Ok(())
}
