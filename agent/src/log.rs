//! Diagnostics: the library crates emit [`tracing`] events (a refused connection, a set-up that
//! failed, a finalize that did not reach the launcher) and never write to stderr themselves.
//! Programs install the subscriber that shows them: the `viaduct` command and the MPI library's
//! `MPI_Init` call [`install_subscriber`], which writes to standard error what `VIADUCT_LOG`
//! lets through.
//!
//! `VIADUCT_LOG` takes a level (`error`, `warn`, `info`, `debug`, `trace`, `off`) or
//! `tracing-subscriber` filter directives (`viaduct_agent=debug,warn`). Unset or empty, it is
//! `warn`: warnings a user must see still show; `VIADUCT_LOG=off` silences them. A value that
//! is not a filter is named in a warning and `warn` is used.
//!
//! A process's last words before it exits on a fatal error (an abort) and output a user asked
//! for (`VIADUCT_REPORT`, `VIADUCT_MPI_VERBOSE`) are written to stderr as they are, whatever
//! `VIADUCT_LOG` says.

use tracing_subscriber::EnvFilter;

/// Environment variable with the filter of the diagnostics shown (default `warn`).
pub const LOG_VAR: &str = "VIADUCT_LOG";

/// The level shown when [`LOG_VAR`] is unset or empty.
pub const DEFAULT_LOG: &str = "warn";

/// Installs, as the process's global default, a subscriber writing to standard error the
/// events [`LOG_VAR`] lets through. Returns false (and changes nothing) when the process has a
/// global subscriber already, e.g. one installed by the program itself.
///
/// ```
/// // Shows the library's warnings (and what VIADUCT_LOG asks for) on stderr.
/// if !viaduct_agent::log::install_subscriber() {
///     // The program installed its own subscriber: events go there.
/// }
/// ```
pub fn install_subscriber() -> bool {
    let raw = std::env::var(LOG_VAR).unwrap_or_default();
    let (filter, bad) = match raw.trim() {
        "" => (EnvFilter::new(DEFAULT_LOG), None),
        text => match EnvFilter::try_new(text) {
            Ok(f) => (f, None),
            Err(e) => (EnvFilter::new(DEFAULT_LOG), Some(e)),
        },
    };
    let installed = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init()
        .is_ok();
    if let (true, Some(e)) = (installed, bad) {
        tracing::warn!("{LOG_VAR}={raw:?} is not a log filter ({e}); showing {DEFAULT_LOG}");
    }
    installed
}
