//! `unpack-crashtest --replay`: one crash state of an earlier run rebuilt as a disk image, from
//! the write log that run kept, for a person to mount and look at. It only reads the earlier
//! run's output and writes the image under `OUT/replay/`.

use super::states::Timeline;
use super::{image, new_workdir, report, CrashError};
use std::path::{Path, PathBuf};

/// Rebuilds state `state` of cell `cell` (its id, as in `crash.json`) of the run whose output
/// is in `out`, from the write log that run kept, as `out/replay/CELL-STATE.img`. Returns the
/// image and the cell's filesystem type.
pub fn replay(out: &Path, cell: &str, state: usize) -> Result<(PathBuf, String), CrashError> {
    let json = out.join(report::JSON);
    let saved = report::Saved::read(&json)?;
    let not_there = |reason: String| CrashError::Replay { path: json.clone(), reason };
    let found = saved.cells.iter().find(|c| c.id == cell).ok_or_else(|| {
        let ids: Vec<&str> = saved.cells.iter().map(|c| c.id.as_str()).collect();
        not_there(format!("no cell '{cell}' (cells: {})", ids.join(", ")))
    })?;
    let log = out.join(
        found.log.as_ref().ok_or_else(|| not_there(format!("cell '{cell}' kept no write log")))?,
    );
    let timeline = Timeline::read(&log, found.disk_bytes)?;
    let selection = timeline.select(saved.states_per_cell, saved.seed);
    let chosen = selection.states.get(state).ok_or_else(|| {
        not_there(format!(
            "cell '{cell}' has states 0 to {}",
            selection.states.len().saturating_sub(1)
        ))
    })?;
    let dest_dir = out.join("replay");
    std::fs::create_dir_all(&dest_dir).map_err(|source| CrashError::Io {
        path: dest_dir.clone(),
        what: "creating",
        source,
    })?;
    let dest = dest_dir.join(format!("{}-{state}.img", cell.replace('/', "_")));
    if dest.exists() {
        std::fs::remove_file(&dest).map_err(|source| CrashError::Io {
            path: dest.clone(),
            what: "removing",
            source,
        })?;
    }
    let work = new_workdir()?;
    image::build_states(
        &log,
        &timeline,
        &[(state, chosen)],
        found.disk_bytes,
        work.path(),
        &mut |_, _, image| image.copy_to(&dest).map(drop),
    )?;
    Ok((dest, found.fs.clone()))
}
