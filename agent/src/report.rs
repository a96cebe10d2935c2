//! `VIADUCT_REPORT`: what a rank tells about itself at start, on stderr.
//!
//! `VIADUCT_REPORT=methods` makes every rank print, once its VCs are connected, one line naming
//! its node, the method serving each peer and the mode of blocking progress
//! ([`Agent::progress_mode`]):
//!
//! ```text
//! viaduct: rank 0 of 4 on node1: methods 0:self 1:shm 2:tcp 3:tcp; progress spin
//! ```
//!
//! Tests and users read it to check which method each pair of ranks uses (shared memory within
//! a node, verbs or TCP between nodes).
//!
//! `VIADUCT_REPORT=memory` makes every rank print the receive memory of its verbs method: its
//! queue pairs and the bytes registered for their receives (a ring per peer, or one shared
//! receive pool, see `VIADUCT_VERBS_RECV_POOL`):
//!
//! ```text
//! viaduct: rank 0 of 4: verbs memory: 3 queue pairs, 2097152 bytes registered for receives
//! ```

use crate::agent::Agent;
use crate::error::AgentError;

/// What `VIADUCT_REPORT` asks for.
///
/// ```
/// use viaduct_agent::report::Report;
///
/// let report = Report::parse("methods").unwrap();
/// assert!(report.methods);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    /// Print the method of every peer.
    pub methods: bool,
    /// Print the verbs method's receive memory.
    pub memory: bool,
}

impl Report {
    /// Parses `VIADUCT_REPORT`: a comma-separated list of `methods` and `memory` (empty: nothing). An unknown
    /// word is an error naming it.
    ///
    /// ```
    /// use viaduct_agent::report::Report;
    ///
    /// assert_eq!(Report::parse("").unwrap(), Report::default());
    /// assert!(Report::parse("timings").is_err());
    /// ```
    pub fn parse(value: &str) -> Result<Report, AgentError> {
        let mut report = Report::default();
        for word in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "methods" => report.methods = true,
                "memory" => report.memory = true,
                other => {
                    return Err(AgentError::Config {
                        setting: "VIADUCT_REPORT",
                        reason: format!("unknown report '{other}' (known: methods, memory)"),
                    });
                }
            }
        }
        Ok(report)
    }

    /// From the environment (`VIADUCT_REPORT`, absent: nothing).
    ///
    /// ```
    /// use viaduct_agent::report::Report;
    ///
    /// fn main() -> Result<(), viaduct_agent::AgentError> {
    ///     let report = Report::from_env()?; // VIADUCT_REPORT=methods asks for the methods line
    ///     println!("methods line: {}", report.methods);
    ///     Ok(())
    /// }
    /// ```
    pub fn from_env() -> Result<Report, AgentError> {
        match std::env::var("VIADUCT_REPORT") {
            Ok(v) => Report::parse(&v),
            Err(std::env::VarError::NotPresent) => Ok(Report::default()),
            Err(std::env::VarError::NotUnicode(_)) => Err(AgentError::Config {
                setting: "VIADUCT_REPORT",
                reason: "not valid UTF-8".to_owned(),
            }),
        }
    }

    /// Prints what was asked for about `agent` on stderr.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// use viaduct_agent::report::Report;
    ///
    /// Report { methods: true, memory: true }.print(&agent);
    /// # Ok(())
    /// # }
    /// ```
    pub fn print(&self, agent: &Agent) {
        if self.methods {
            eprintln!("{}", methods_line(agent));
        }
        if self.memory {
            eprintln!("{}", memory_line(agent));
        }
    }
}

/// `viaduct: rank R of N: verbs memory: Q queue pairs, B bytes registered for receives`.
///
/// ```
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::singleton()?;
/// let line = viaduct_agent::report::memory_line(&agent);
/// assert!(line.ends_with("0 queue pairs, 0 bytes registered for receives"), "{line}");
/// # Ok(())
/// # }
/// ```
pub fn memory_line(agent: &Agent) -> String {
    let (qps, bytes) = agent.verbs_receive_memory();
    format!(
        "viaduct: rank {} of {}: verbs memory: {qps} queue pairs, {bytes} bytes registered for \
         receives",
        agent.rank(),
        agent.size()
    )
}

/// `viaduct: rank R of N on HOST: methods 0:self 1:shm ...; progress MODE`.
///
/// ```
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::singleton()?;
/// let line = viaduct_agent::report::methods_line(&agent);
/// assert!(line.contains("0:self"), "{line}");
/// # Ok(())
/// # }
/// ```
pub fn methods_line(agent: &Agent) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned());
    let methods: Vec<String> = (0..agent.size())
        .map(|p| format!("{p}:{}", agent.method_of(p).unwrap_or("?")))
        .collect();
    format!(
        "viaduct: rank {} of {} on {host}: methods {}; progress {}",
        agent.rank(),
        agent.size(),
        methods.join(" "),
        agent.progress_mode().name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_words_and_names_unknown_ones() {
        assert_eq!(Report::parse("").unwrap(), Report::default());
        assert!(Report::parse("methods").unwrap().methods);
        assert!(Report::parse(" methods , ").unwrap().methods);
        let both = Report::parse("memory,methods").unwrap();
        assert!(both.memory && both.methods);
        let err = Report::parse("methods,speed").unwrap_err().to_string();
        assert!(err.contains("speed"), "{err}");
    }

    #[test]
    fn a_singleton_reports_its_self_loop() {
        let agent = Agent::singleton().unwrap();
        let line = methods_line(&agent);
        assert!(line.starts_with("viaduct: rank 0 of 1 on "), "{line}");
        assert!(line.ends_with("methods 0:self; progress spin"), "{line}");
    }
}
