//! A bpffs of a test's own, and a loaded program's maps pinned into it
//! where the daemon's instance keeps them ([`PinDir`]), for `status` and
//! `explain` to read with or without a daemon.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use aya::maps::MapData;
use aya::programs::loaded_programs;

use super::leftovers;
use crate::dataplane::mount_bpffs;
use crate::dataplane::pins::PinDir;

/// Mounted at a directory of its own (in the test's mount namespace, so
/// it outlives a daemon under `ip netns exec`); unmounted, which removes
/// what is pinned in it, and removed when dropped.
pub struct Bpffs(PathBuf);

impl Bpffs {
    /// A bpffs at a new directory under the temporary directory, named
    /// after `name` and this process.
    pub fn mount(name: &str) -> Result<Self> {
        Self::at(&std::env::temp_dir().join(format!("fabriclb-{name}-{}", std::process::id())))
    }

    /// A bpffs at `dir`, created if missing.
    pub fn at(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
        leftovers::hold(dir);
        let bpffs = Self(dir.to_owned());
        mount_bpffs(dir).with_context(|| format!("mounting bpffs at {}", dir.display()))?;
        Ok(bpffs)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `fabriclb run`'s arguments for instance `instance` in it.
    pub fn args(&self, instance: &str) -> Vec<String> {
        vec![
            "--bpffs".into(),
            self.0.display().to_string(),
            "--instance".into(),
            instance.into(),
        ]
    }
}

impl Drop for Bpffs {
    fn drop(&mut self) {
        leftovers::remove(&self.0);
    }
}

/// Pins every map of the loaded program `prog_id` under `pins`, by name.
pub fn pin_program_maps(prog_id: u32, pins: &PinDir) -> Result<()> {
    std::fs::create_dir_all(pins.dir()).with_context(|| pins.dir().display().to_string())?;
    let program = loaded_programs()
        .filter_map(Result::ok)
        .find(|p| p.id() == prog_id)
        .ok_or_else(|| anyhow!("program {prog_id} is not loaded"))?;
    let ids = program
        .map_ids()?
        .ok_or_else(|| anyhow!("program {prog_id} lists no maps"))?;
    for id in ids {
        let map = MapData::from_id(id)?;
        let info = map.info()?;
        let name = info.name_as_str().unwrap_or_default();
        // aya names each data section (`.rodata`) a map too.
        if !name.starts_with('.') {
            map.pin(pins.map(name))?;
        }
    }
    Ok(())
}
