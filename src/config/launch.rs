//! How this process joins a job, decided before the rest of the
//! configuration: alone or a locale started by locale 0 (shared memory),
//! or a rank that an MPI launcher started (its variables say so).

use super::env::invalid;
use super::*;
use crate::error::ErrorKind;

/// Variables by which MPI launchers tell a process its place (Open MPI,
/// MPICH's Hydra and other PMI launchers, PMIx): `(name, gives the size)`.
pub(super) const MPI_LAUNCHER_VARS: [(&str, bool); 4] = [
    ("OMPI_COMM_WORLD_SIZE", true),
    ("PMI_SIZE", true),
    ("PMIX_RANK", false),
    ("PMI_RANK", false),
];

/// If an MPI launcher started this process: the variable that says so,
/// and the job's size if the launcher gives it.
pub(crate) fn mpi_launcher() -> Option<(&'static str, Option<usize>)> {
    let found = MPI_LAUNCHER_VARS
        .iter()
        .find(|(name, _)| std::env::var_os(name).is_some())?;
    let size = MPI_LAUNCHER_VARS
        .iter()
        .filter(|(_, gives_size)| *gives_size)
        .find_map(|(name, _)| std::env::var(name).ok()?.trim().parse::<usize>().ok());
    Some((found.0, size))
}

impl Builder {
    /// How this process joins a job (`CANTUS_TRANSPORT`, an MPI launcher's
    /// variables, `CANTUS_LOCALE`), before anything else is resolved.
    pub(super) fn launch(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Launch, Error> {
        // A locale that locale 0 started over shared memory (it inherits
        // locale 0's environment, launcher variables included).
        if std::env::var_os(LOCALE_VAR).is_some() {
            return Ok(Launch::SharedMemory);
        }
        let launcher = mpi_launcher();
        match env(TRANSPORT_VAR).map(|v| v.trim().to_ascii_lowercase()) {
            Some(v) if v == "shm" => return Ok(Launch::SharedMemory),
            Some(v) if v == "mpi" => {
                return if cfg!(feature = "mpi") {
                    Ok(Launch::Mpi)
                } else {
                    Err(without_mpi(&format!("{TRANSPORT_VAR}=mpi asks for MPI")))
                };
            }
            Some(v) => return Err(invalid(TRANSPORT_VAR, &v, "shm or mpi")),
            None => {}
        }
        match launcher {
            Some(_) if cfg!(feature = "mpi") => Ok(Launch::Mpi),
            // One rank: running the program as it is is what was asked.
            Some((_, Some(1))) => Ok(Launch::SharedMemory),
            Some((var, size)) => Err(without_mpi(&match size {
                Some(n) => format!(
                    "an MPI launcher started this program as one of {n} ranks ({var} is set)"
                ),
                None => format!("an MPI launcher started this program ({var} is set)"),
            })),
            None => Ok(Launch::SharedMemory),
        }
    }
}

/// The error for MPI asked of a build without the `mpi` feature.
fn without_mpi(why: &str) -> Error {
    Error::new(
        ErrorKind::InvalidConfig,
        format!(
            "cantus: {why}, but cantus was built without its `mpi` feature, so each rank would \
             run the whole program alone; build with `--features cantus/mpi` (MPI and libclang \
             installed), or start the job without mpirun (CANTUS_LOCALES=n runs n locales on \
             this machine), or set {TRANSPORT_VAR}=shm to run each rank as a job of its own"
        ),
    )
}
