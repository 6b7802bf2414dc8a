//! `crash-apt.svg`: the apt scenario's cells at a glance, written beside `crash.md` when the
//! matrix has any (issue 28 asks a chart of its table).
//!
//! Why grouped bars of state counts: the question is "what does a power cut inside an apt run
//! leave, with the engine and with dpkg", and the cells of one run have the same number of
//! states, so counts compare directly: for each outcome (a violation after `unpack --recover`
//! alone, a package needing reinstall, the repair needing `apt-get -f install`, the repair
//! failing) one bar per cell, its height the states that showed it, its label the count. The
//! outcomes overlap (a state can need a reinstall and show a violation), so they are never
//! stacked into one bar. A cell that could not be run has no bars and says so in the legend.
//! This module only draws what the matrix holds.

use super::matrix::{AptStates, CellResult, Matrix};
use super::CrashError;
use plotters::prelude::*;
use std::path::Path;

/// The chart's file name in the output directory.
pub const APT_SVG: &str = "crash-apt.svg";

/// How a cell's count of one outcome is read.
type Count = fn(&AptStates) -> usize;

/// The outcomes, in the order drawn: what the x axis names, and how a cell's count is read.
const OUTCOMES: [(&str, Count); 4] = [
    ("violation after recovery", |a| a.states_with_violations_after_recovery),
    ("a package needs reinstall", |a| a.states_needing_reinstall),
    ("repair needed apt-get -f install", |a| a.states_apt_fix),
    ("repair failed", |a| a.states_repair_failed),
];

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Writes the chart of the apt cells of `m` to `path`; nothing when it has none.
pub fn write_apt_svg(m: &Matrix, path: &Path) -> Result<(), CrashError> {
    let cells: Vec<&CellResult> = m.cells.iter().filter(|c| c.apt.is_some()).collect();
    if cells.is_empty() {
        return Ok(());
    }
    draw(&cells, m.states_per_cell, path).map_err(|e| CrashError::Io {
        path: path.to_path_buf(),
        what: "drawing the chart",
        source: std::io::Error::other(e.to_string()),
    })
}

type Drawn = Result<(), Box<dyn std::error::Error>>;

fn draw(cells: &[&CellResult], states: usize, path: &Path) -> Drawn {
    let root = SVGBackend::new(path, (1000, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let top = cells
        .iter()
        .filter_map(|c| c.apt.as_ref())
        .flat_map(|a| OUTCOMES.iter().map(move |(_, count)| count(a)))
        .max()
        .unwrap_or(0)
        .max(1);
    let groups = OUTCOMES.len() as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("A power cut inside apt-get upgrade: states of {states} per cell"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0.0..groups, 0.0..(top as f64 * 1.25))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(OUTCOMES.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            let centred = (x - x.floor() - 0.5).abs() < 1e-9;
            OUTCOMES.get(i).filter(|_| centred).map_or(String::new(), |(name, _)| name.to_string())
        })
        .y_desc("states")
        .label_style(("sans-serif", 12))
        .draw()?;
    let width = 0.8 / cells.len() as f64;
    for (n, cell) in cells.iter().enumerate() {
        let colour = COLOURS[n % COLOURS.len()];
        let label = match &cell.error {
            Some(_) => format!("{} (could not be run)", cell.id),
            None => format!("{} ({} states)", cell.id, cell.states),
        };
        let Some(apt) = cell.apt.as_ref().filter(|_| cell.error.is_none()) else {
            chart.draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())?.label(label);
            continue;
        };
        let bars = OUTCOMES.iter().enumerate().map(|(g, (_, count))| {
            let x = g as f64 + 0.1 + width * n as f64;
            (x, count(apt))
        });
        chart
            .draw_series(bars.clone().map(|(x, v)| {
                Rectangle::new([(x, 0.0), (x + width * 0.9, v as f64)], colour.filled())
            }))?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
        chart.draw_series(bars.map(|(x, v)| {
            Text::new(
                v.to_string(),
                (x + width * 0.3, v as f64 + top as f64 * 0.03),
                ("sans-serif", 12),
            )
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 12))
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash::matrix::Scenario;
    use std::time::Duration;

    fn apt_cell(strategy: &str, needing: usize, error: Option<&str>) -> CellResult {
        let mut cell =
            CellResult::new("ext4", "defaults", Scenario::Apt, strategy, Duration::ZERO, 1 << 29);
        cell.states = 30;
        cell.error = error.map(str::to_string);
        let apt = cell.apt.as_mut().unwrap();
        apt.states_needing_reinstall = needing;
        apt.states_apt_fix = needing;
        cell
    }

    fn matrix(cells: Vec<CellResult>) -> Matrix {
        Matrix { package: None, seed: 1, states_per_cell: 30, io_flusher: true, cells }
    }

    #[test]
    fn the_chart_names_every_apt_cell_and_draws_its_counts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(APT_SVG);
        let cells = vec![
            apt_cell("syncfs", 8, None),
            apt_cell("dpkg", 11, None),
            apt_cell("none", 0, Some("no disk")),
        ];
        write_apt_svg(&matrix(cells), &path).unwrap();
        // plotters writes each text on lines of its own.
        let svg = std::fs::read_to_string(&path).unwrap().replace('\n', "");
        for text in [
            "ext4/defaults/apt/syncfs (30 states)",
            "ext4/defaults/apt/dpkg (30 states)",
            "ext4/defaults/apt/none (could not be run)",
            ">11<",
            ">8<",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
    }

    #[test]
    fn a_matrix_without_apt_cells_gets_no_chart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(APT_SVG);
        let cell =
            CellResult::new("ext4", "defaults", Scenario::Install, "none", Duration::ZERO, 1);
        write_apt_svg(&matrix(vec![cell]), &path).unwrap();
        assert!(!path.exists());
    }
}
