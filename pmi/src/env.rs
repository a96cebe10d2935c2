//! Reading the launcher's environment: which PMI dialect to speak, and where.
//!
//! | launcher | variables it sets | dialect here |
//! | --- | --- | --- |
//! | MPICH hydra `mpiexec` | `PMI_FD`, `PMI_RANK`, `PMI_SIZE` | PMI-1 over the inherited socket |
//! | hydra with a port, `viaduct launch` | `PMI_PORT` (`host:port`), `PMI_ID` (+ `PMI_RANK`, `PMI_SIZE`) | PMI-1 over TCP |
//! | Slurm `srun --mpi=pmi2` | `PMI_FD`, `PMI_RANK`, `PMI_SIZE`, `PMI_JOBID` | PMI-2 over the inherited socket |
//! | none | no `PMI_*` variable at all | singleton: one rank |
//!
//! `VIADUCT_PMI=1` or `=2` overrides the dialect picked for an inherited socket. Any other mix is
//! an error naming the missing variable: a rank that silently ran alone would wait forever for
//! peers or, worse, compute a wrong answer.

use std::collections::BTreeMap;

use super::error::BootstrapError;

/// The PMI variables looked at, in the order they are reported.
pub const PMI_VARS: [&str; 6] = [
    "PMI_FD",
    "PMI_PORT",
    "PMI_ID",
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_JOBID",
];

/// Variable choosing the dialect on an inherited socket: `1` or `2`.
pub const DIALECT_VAR: &str = "VIADUCT_PMI";

/// Where and how to reach the process manager, as read from the environment.
///
/// ```
/// use viaduct_pmi::env::{PmiEnv, detect};
///
/// let env = detect([("PMI_PORT", "127.0.0.1:4000"), ("PMI_ID", "1")]).unwrap();
/// assert!(matches!(env, PmiEnv::Pmi1Port { id: 1, .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PmiEnv {
    /// No PMI variable is set: this process is the only rank.
    Singleton,
    /// PMI-1 over an inherited socket (hydra's default).
    Pmi1Fd {
        /// The inherited descriptor.
        fd: i32,
        /// `PMI_RANK`.
        rank: u32,
        /// `PMI_SIZE`.
        size: u32,
    },
    /// PMI-1 over TCP (`PMI_PORT` + `PMI_ID`).
    Pmi1Port {
        /// `host:port`.
        addr: String,
        /// `PMI_ID`: the identity presented in `initack`.
        id: u32,
        /// `PMI_RANK`, when set (the server's answer is authoritative and checked against it).
        rank: Option<u32>,
        /// `PMI_SIZE`, when set.
        size: Option<u32>,
    },
    /// PMI-2 over an inherited socket (Slurm's `srun --mpi=pmi2`).
    Pmi2Fd {
        /// The inherited descriptor.
        fd: i32,
        /// `PMI_RANK`, when set.
        rank: Option<u32>,
        /// `PMI_SIZE`, when set.
        size: Option<u32>,
        /// `PMI_JOBID`, when set.
        jobid: Option<String>,
    },
}

/// Reads the PMI environment from `vars` (name, value pairs, e.g. `std::env::vars()`).
///
/// ```
/// use viaduct_pmi::env::{PmiEnv, detect};
///
/// assert_eq!(detect(std::iter::empty::<(&str, &str)>()).unwrap(), PmiEnv::Singleton);
/// assert!(detect([("PMI_FD", "not a number")]).is_err());
/// ```
pub fn detect<I, K, V>(vars: I) -> Result<PmiEnv, BootstrapError>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let vars: BTreeMap<String, String> = vars
        .into_iter()
        .filter(|(k, _)| PMI_VARS.contains(&k.as_ref()) || k.as_ref() == DIALECT_VAR)
        .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
        .collect();
    let get = |name: &str| vars.get(name).map(String::as_str);
    let present = PMI_VARS
        .iter()
        .filter(|v| vars.contains_key(**v))
        .copied()
        .collect::<Vec<_>>()
        .join(", ");

    let dialect = match get(DIALECT_VAR) {
        None => None,
        Some("1") => Some(1),
        Some("2") => Some(2),
        Some(other) => {
            return Err(BootstrapError::BadEnv {
                var: DIALECT_VAR,
                value: other.to_owned(),
                reason: "must be 1 or 2".into(),
            });
        }
    };

    if present.is_empty() {
        if dialect.is_some() {
            return Err(BootstrapError::MissingEnv {
                present: DIALECT_VAR.into(),
                missing: "PMI_FD or PMI_PORT",
                hint: "a PMI dialect was asked for but no launcher started this process",
            });
        }
        return Ok(PmiEnv::Singleton);
    }

    let size = parse_opt(get("PMI_SIZE"), "PMI_SIZE")?;
    if size == Some(0) {
        return Err(BootstrapError::BadEnv {
            var: "PMI_SIZE",
            value: "0".into(),
            reason: "a job has at least one rank".into(),
        });
    }
    let rank = parse_opt(get("PMI_RANK"), "PMI_RANK")?;
    if let Some((rank, size)) = rank.zip(size).filter(|(r, s)| r >= s) {
        return Err(BootstrapError::BadEnv {
            var: "PMI_RANK",
            value: rank.to_string(),
            reason: format!("must be below PMI_SIZE={size}"),
        });
    }

    if let Some(raw_fd) = get("PMI_FD") {
        let fd = raw_fd
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|fd| *fd >= 0)
            .ok_or_else(|| BootstrapError::BadEnv {
                var: "PMI_FD",
                value: raw_fd.to_owned(),
                reason: "not a descriptor number".into(),
            })?;
        let pmi2 = dialect.map_or(vars.contains_key("PMI_JOBID"), |d| d == 2);
        if pmi2 {
            return Ok(PmiEnv::Pmi2Fd {
                fd,
                rank,
                size,
                jobid: get("PMI_JOBID").map(str::to_owned),
            });
        }
        let hint = "PMI-1 over PMI_FD learns rank and size only from the environment";
        let rank = rank.ok_or_else(|| BootstrapError::MissingEnv {
            present: present.clone(),
            missing: "PMI_RANK",
            hint,
        })?;
        let size = size.ok_or_else(|| BootstrapError::MissingEnv {
            present: present.clone(),
            missing: "PMI_SIZE",
            hint,
        })?;
        return Ok(PmiEnv::Pmi1Fd { fd, rank, size });
    }

    if let Some(addr) = get("PMI_PORT") {
        if dialect == Some(2) {
            return Err(BootstrapError::BadEnv {
                var: DIALECT_VAR,
                value: "2".into(),
                reason: "PMI-2 is spoken only over an inherited PMI_FD here".into(),
            });
        }
        check_host_port(addr)?;
        let id = parse_opt(get("PMI_ID"), "PMI_ID")?.ok_or_else(|| BootstrapError::MissingEnv {
            present: present.clone(),
            missing: "PMI_ID",
            hint: "PMI_PORT needs PMI_ID to tell the server which process connects",
        })?;
        return Ok(PmiEnv::Pmi1Port {
            addr: addr.to_owned(),
            id,
            rank,
            size,
        });
    }

    Err(BootstrapError::MissingEnv {
        present,
        missing: "PMI_FD or PMI_PORT",
        hint: "the launcher gave rank information but no way to reach its PMI server; \
               start the program with mpiexec, srun --mpi=pmi2 or viaduct launch, \
               or unset the PMI_* variables to run a single rank",
    })
}

fn parse_opt(value: Option<&str>, var: &'static str) -> Result<Option<u32>, BootstrapError> {
    value
        .map(|v| {
            v.trim().parse::<u32>().map_err(|_| BootstrapError::BadEnv {
                var,
                value: v.to_owned(),
                reason: "not a non-negative integer".into(),
            })
        })
        .transpose()
}

fn check_host_port(addr: &str) -> Result<(), BootstrapError> {
    let ok = addr
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if ok {
        Ok(())
    } else {
        Err(BootstrapError::BadEnv {
            var: "PMI_PORT",
            value: addr.to_owned(),
            reason: "expected host:port".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<PmiEnv, BootstrapError> {
        detect(pairs.iter().copied())
    }

    #[test]
    fn nothing_set_is_a_singleton() {
        assert_eq!(env(&[("HOME", "/root")]).unwrap(), PmiEnv::Singleton);
    }

    #[test]
    fn hydra_fd_is_pmi1() {
        let e = env(&[("PMI_FD", "7"), ("PMI_RANK", "1"), ("PMI_SIZE", "4")]).unwrap();
        assert_eq!(
            e,
            PmiEnv::Pmi1Fd {
                fd: 7,
                rank: 1,
                size: 4
            }
        );
    }

    #[test]
    fn slurm_fd_is_pmi2_and_can_be_overridden() {
        let slurm = [
            ("PMI_FD", "5"),
            ("PMI_RANK", "0"),
            ("PMI_SIZE", "2"),
            ("PMI_JOBID", "12.0"),
        ];
        assert!(matches!(env(&slurm).unwrap(), PmiEnv::Pmi2Fd { fd: 5, .. }));
        let mut forced = slurm.to_vec();
        forced.push(("VIADUCT_PMI", "1"));
        assert!(matches!(
            env(&forced).unwrap(),
            PmiEnv::Pmi1Fd { fd: 5, .. }
        ));
        let e = env(&[("PMI_FD", "5"), ("VIADUCT_PMI", "2")]).unwrap();
        assert!(matches!(e, PmiEnv::Pmi2Fd { rank: None, .. }));
    }

    #[test]
    fn port_mode_needs_an_id() {
        let e = env(&[("PMI_PORT", "127.0.0.1:4000"), ("PMI_ID", "3")]).unwrap();
        assert!(matches!(
            e,
            PmiEnv::Pmi1Port {
                id: 3,
                rank: None,
                ..
            }
        ));
        let err = env(&[("PMI_PORT", "127.0.0.1:4000")]).unwrap_err();
        assert!(err.to_string().contains("PMI_ID"), "{err}");
        let err = env(&[("PMI_PORT", "nohost"), ("PMI_ID", "0")]).unwrap_err();
        assert!(err.to_string().contains("host:port"), "{err}");
    }

    #[test]
    fn half_present_environments_are_errors() {
        let err = env(&[("PMI_RANK", "0")]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("PMI_RANK set"), "{text}");
        assert!(text.contains("PMI_FD or PMI_PORT"), "{text}");
        let err = env(&[("PMI_FD", "3"), ("PMI_SIZE", "2")]).unwrap_err();
        assert!(err.to_string().contains("PMI_RANK"), "{err}");
        let err = env(&[("PMI_FD", "3"), ("PMI_RANK", "0"), ("PMI_SIZE", "two")]).unwrap_err();
        assert!(err.to_string().contains("PMI_SIZE=\"two\""), "{err}");
        let err = env(&[("PMI_FD", "x"), ("PMI_RANK", "0"), ("PMI_SIZE", "1")]).unwrap_err();
        assert!(err.to_string().contains("PMI_FD"), "{err}");
        let err = env(&[("PMI_FD", "3"), ("PMI_RANK", "4"), ("PMI_SIZE", "4")]).unwrap_err();
        assert!(err.to_string().contains("below PMI_SIZE=4"), "{err}");
        let err = env(&[("PMI_FD", "3"), ("PMI_RANK", "0"), ("PMI_SIZE", "0")]).unwrap_err();
        assert!(err.to_string().contains("at least one rank"), "{err}");
        assert!(env(&[("VIADUCT_PMI", "2")]).is_err());
        assert!(env(&[("VIADUCT_PMI", "3"), ("PMI_FD", "3")]).is_err());
        assert!(env(&[("PMI_JOBID", "1")]).is_err());
    }
}
