//! `MPIX_COMM_TYPE_NEIGHBORHOOD` (MPICH's extension to `MPI_Comm_split_type`): the members
//! that see the same directory, named by the info key `nbhd_common_dirname`, form one
//! communicator (processes sharing a file system, as MPICH's I/O layer groups them).
//!
//! Which members share a file system cannot be told from a path: a member first in line
//! creates an empty file of a fresh name in its directory, and every member still without a
//! group that finds a file of that name in its own directory joins the creator's. Rounds go
//! on until no member is left that has a directory; one round per file system among the
//! members. A member without the key, or whose directory does not exist or takes no file,
//! gets `MPI_COMM_NULL`, as in MPICH.

use std::path::{Path, PathBuf};

use viaduct_agent::comm::Comm;

use crate::abi::Handle;
use crate::error::MpiError;

/// The info key naming the directory.
const DIR_KEY: &str = "nbhd_common_dirname";

/// Bytes of a file name as broadcast (NUL-padded; empty when the file could not be made).
const NAME_LEN: usize = 96;

/// This member's color (collective over `comm`): the communicator rank of the member whose
/// file it saw first, or `None`.
pub(crate) fn color(comm: &Comm, info: Handle) -> Result<Option<u32>, MpiError> {
    let dir: Option<PathBuf> = crate::misc::hints_of(info)?
        .iter()
        .find(|(k, _)| k == DIR_KEY)
        .map(|(_, v)| PathBuf::from(v));
    let mut usable = dir.as_deref().is_some_and(Path::is_dir);
    let (me, n) = (comm.rank(), comm.size() as usize);
    let mut color = None;
    for round in 0u32.. {
        let waiting = [u8::from(usable && color.is_none())];
        let mut all = vec![0u8; n];
        comm.allgather(&waiting, &mut all)?;
        let Some(lead) = all.iter().position(|&w| w == 1) else {
            break;
        };
        let lead = lead as u32;
        let mut name = [0u8; NAME_LEN];
        let mut made = None;
        if me == lead {
            let file = format!(
                ".viaduct-nbhd-{}-{}-{round}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos())
            );
            let path = dir.as_deref().unwrap_or(Path::new(".")).join(&file);
            if std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .is_ok()
            {
                name[..file.len()].copy_from_slice(file.as_bytes());
                made = Some(path);
            } else {
                // This directory takes no file: the leader drops out.
                usable = false;
            }
        }
        comm.bcast(&mut name, lead)?;
        let len = name.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
        if len > 0 && usable && color.is_none() {
            let file = String::from_utf8_lossy(&name[..len]).into_owned();
            if dir.as_deref().is_some_and(|d| d.join(file).exists()) {
                color = Some(lead);
            }
        }
        comm.barrier()?;
        if let Some(path) = made {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(color)
}
