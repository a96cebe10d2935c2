//! PMI-2 client: the protocol of Slurm's `srun --mpi=pmi2` (hydra speaks it too).
//!
//! Exchange order: a PMI-1 line `init pmi_version=2 pmi_subversion=0` answered by
//! `response_to_init`; then PMI-2 records: `fullinit` (rank, size), `job-getid`,
//! `info-getjobattr` (`PMI_process_mapping`), any number of `kvs-put` / `kvs-fence` /
//! `kvs-get`, and `finalize`. Every answer is awaited at most the connection's timeout.

use std::time::Duration;

use super::conn::{Conn, PmiSocket, check_rc, int_field, to_u32};
use super::error::BootstrapError;
use super::fd::adopt_inherited_fd;
use super::wire::{Message, check_key, check_value, shorten};

/// Longest value PMI-2 servers accept (`PMI2_MAX_VALLEN` in MPICH and Slurm).
pub const MAX_VALUE_LEN: usize = 1024;
/// Longest key PMI-2 servers accept (`PMI2_MAX_KEYLEN`).
pub const MAX_KEY_LEN: usize = 64;

/// A PMI-2 client connection, initialised.
///
/// ```no_run
/// # use std::time::Duration;
/// # use viaduct_pmi::pmi2::Pmi2Client;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Under `srun --mpi=pmi2`: the socket Slurm passed in PMI_FD.
/// let fd: i32 = std::env::var("PMI_FD")?.parse()?;
/// let mut client = Pmi2Client::from_fd(fd, None, None, None, Duration::from_secs(60))?;
/// client.put("card", "v")?;
/// client.fence()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Pmi2Client {
    conn: Conn,
    rank: u32,
    size: u32,
    jobid: Option<String>,
    finalized: bool,
}

impl Pmi2Client {
    /// Takes over the inherited socket `fd` and initialises. `env_rank`/`env_size` (from
    /// `PMI_RANK`/`PMI_SIZE`) are checked against the server's answer; `jobid` is `PMI_JOBID`.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi2::Pmi2Client;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Under `srun --mpi=pmi2`: the socket Slurm passed in PMI_FD.
    /// let fd: i32 = std::env::var("PMI_FD")?.parse()?;
    /// let mut client = Pmi2Client::from_fd(fd, None, None, None, Duration::from_secs(60))?;
    /// println!("rank {} of {}", client.rank(), client.size());
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_fd(
        fd: i32,
        env_rank: Option<u32>,
        env_size: Option<u32>,
        jobid: Option<&str>,
        timeout: Duration,
    ) -> Result<Self, BootstrapError> {
        let stream = adopt_inherited_fd(fd)?;
        let mut conn = Conn::new(PmiSocket::Unix(stream), timeout)?;

        let op = "init";
        conn.send_v1(
            op,
            &Message::new("init")
                .with("pmi_version", 2)
                .with("pmi_subversion", 0),
        )?;
        let answer = conn.expect_v1(op, "response_to_init")?;
        check_rc(op, &answer)?;
        if let Some(Ok(version)) = answer.get_int("pmi_version").filter(|v| *v != Ok(2)) {
            return Err(BootstrapError::Protocol {
                op,
                detail: format!(
                    "the server speaks PMI version {version}, not 2 (set VIADUCT_PMI=1)"
                ),
            });
        }

        let op = "fullinit";
        // Slurm wants all three fields; pmijobid is only echoed back in its logs.
        let pmijobid = jobid
            .and_then(|j| j.split('.').next())
            .filter(|j| j.bytes().all(|b| b.is_ascii_digit()) && !j.is_empty())
            .unwrap_or("-1");
        let rank_hint = env_rank.map_or(-1, i64::from);
        conn.send_v2(
            op,
            &Message::new("fullinit")
                .with("pmijobid", pmijobid)
                .with("pmirank", rank_hint)
                .with("threaded", "FALSE"),
        )?;
        let answer = conn.expect_v2(op, "fullinit-response")?;
        check_rc(op, &answer)?;
        let rank = to_u32(op, "rank", int_field(op, &answer, "rank")?)?;
        let size = to_u32(op, "size", int_field(op, &answer, "size")?)?;
        if rank >= size {
            return Err(BootstrapError::Protocol {
                op,
                detail: format!("rank {rank} is not below size {size}"),
            });
        }
        for (what, from_env, from_server) in [("rank", env_rank, rank), ("size", env_size, size)] {
            if let Some(from_env) = from_env.filter(|e| *e != from_server) {
                return Err(BootstrapError::Mismatch {
                    what,
                    from_env,
                    from_server,
                });
            }
        }

        let op = "job-getid";
        conn.send_v2(op, &Message::new("job-getid"))?;
        let answer = conn.expect_v2(op, "job-getid-response")?;
        let jobid = match check_rc(op, &answer) {
            Ok(()) => answer.get("jobid").map(str::to_owned),
            Err(_) => None,
        };

        Ok(Self {
            conn,
            rank,
            size,
            jobid,
            finalized: false,
        })
    }

    /// This process's rank.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi2::Pmi2Client;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Under `srun --mpi=pmi2`: the socket Slurm passed in PMI_FD.
    /// let fd: i32 = std::env::var("PMI_FD")?.parse()?;
    /// let mut client = Pmi2Client::from_fd(fd, None, None, None, Duration::from_secs(60))?;
    /// let me = client.rank();
    /// # Ok(())
    /// # }
    /// ```
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of ranks in the job.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi2::Pmi2Client;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Under `srun --mpi=pmi2`: the socket Slurm passed in PMI_FD.
    /// let fd: i32 = std::env::var("PMI_FD")?.parse()?;
    /// let mut client = Pmi2Client::from_fd(fd, None, None, None, Duration::from_secs(60))?;
    /// let n = client.size();
    /// # Ok(())
    /// # }
    /// ```
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The job id the server gave (`job-getid`), if any.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi2::Pmi2Client;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Under `srun --mpi=pmi2`: the socket Slurm passed in PMI_FD.
    /// let fd: i32 = std::env::var("PMI_FD")?.parse()?;
    /// let mut client = Pmi2Client::from_fd(fd, None, None, None, Duration::from_secs(60))?;
    /// println!("job {:?}", client.jobid());
    /// # Ok(())
    /// # }
    /// ```
    pub fn jobid(&self) -> Option<&str> {
        self.jobid.as_deref()
    }

    /// A job attribute (`info-getjobattr`), e.g. `PMI_process_mapping`; `None` when not found.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi2::Pmi2Client;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Under `srun --mpi=pmi2`: the socket Slurm passed in PMI_FD.
    /// let fd: i32 = std::env::var("PMI_FD")?.parse()?;
    /// let mut client = Pmi2Client::from_fd(fd, None, None, None, Duration::from_secs(60))?;
    /// let mapping = client.job_attr("PMI_process_mapping")?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn job_attr(&mut self, key: &str) -> Result<Option<String>, BootstrapError> {
        let op = "info-getjobattr";
        self.check(op, key, None)?;
        self.conn
            .send_v2(op, &Message::new("info-getjobattr").with("key", key))?;
        let answer = self.conn.expect_v2(op, "info-getjobattr-response")?;
        check_rc(op, &answer)?;
        Self::found_value(op, &answer)
    }

    /// Stores `value` under `key`; visible to other ranks after the next [`Self::fence`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi2::Pmi2Client;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Under `srun --mpi=pmi2`: the socket Slurm passed in PMI_FD.
    /// let fd: i32 = std::env::var("PMI_FD")?.parse()?;
    /// let mut client = Pmi2Client::from_fd(fd, None, None, None, Duration::from_secs(60))?;
    /// client.put("card", "value")?;
    /// client.fence()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        let op = "kvs-put";
        self.check(op, key, Some(value))?;
        self.conn.send_v2(
            op,
            &Message::new("kvs-put")
                .with("key", key)
                .with("value", value),
        )?;
        let answer = self.conn.expect_v2(op, "kvs-put-response")?;
        check_rc(op, &answer)
    }

    /// Waits until every rank has fenced; commits the puts made before it.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi2::Pmi2Client;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Under `srun --mpi=pmi2`: the socket Slurm passed in PMI_FD.
    /// let fd: i32 = std::env::var("PMI_FD")?.parse()?;
    /// let mut client = Pmi2Client::from_fd(fd, None, None, None, Duration::from_secs(60))?;
    /// client.fence()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn fence(&mut self) -> Result<(), BootstrapError> {
        let op = "kvs-fence";
        self.conn.send_v2(op, &Message::new("kvs-fence"))?;
        let answer = self.conn.expect_v2(op, "kvs-fence-response")?;
        check_rc(op, &answer)
    }

    /// The value stored under `key`, or `None` when the server does not have it.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi2::Pmi2Client;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Under `srun --mpi=pmi2`: the socket Slurm passed in PMI_FD.
    /// let fd: i32 = std::env::var("PMI_FD")?.parse()?;
    /// let mut client = Pmi2Client::from_fd(fd, None, None, None, Duration::from_secs(60))?;
    /// client.fence()?;
    /// let card = client.get("card")?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn get(&mut self, key: &str) -> Result<Option<String>, BootstrapError> {
        let op = "kvs-get";
        self.check(op, key, None)?;
        let mut msg = Message::new("kvs-get");
        if let Some(jobid) = &self.jobid {
            msg = msg.with("jobid", jobid);
        }
        let msg = msg.with("srcid", -1).with("key", key);
        self.conn.send_v2(op, &msg)?;
        let answer = self.conn.expect_v2(op, "kvs-get-response")?;
        if check_rc(op, &answer).is_err() {
            return Ok(None);
        }
        Self::found_value(op, &answer)
    }

    /// Tells the server this process is done with PMI.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi2::Pmi2Client;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Under `srun --mpi=pmi2`: the socket Slurm passed in PMI_FD.
    /// let fd: i32 = std::env::var("PMI_FD")?.parse()?;
    /// let mut client = Pmi2Client::from_fd(fd, None, None, None, Duration::from_secs(60))?;
    /// client.finalize()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn finalize(&mut self) -> Result<(), BootstrapError> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        let op = "finalize";
        self.conn.send_v2(op, &Message::new("finalize"))?;
        let answer = self.conn.expect_v2(op, "finalize-response");
        self.conn.close();
        check_rc(op, &answer?)
    }

    /// Asks the server to end the whole job. No answer is awaited.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi2::Pmi2Client;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Under `srun --mpi=pmi2`: the socket Slurm passed in PMI_FD.
    /// let fd: i32 = std::env::var("PMI_FD")?.parse()?;
    /// let mut client = Pmi2Client::from_fd(fd, None, None, None, Duration::from_secs(60))?;
    /// client.abort(1, "giving up")?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn abort(&mut self, exit_code: i32, message: &str) -> Result<(), BootstrapError> {
        self.finalized = true;
        let message: String = message
            .chars()
            .map(|c| {
                if c == ' ' || (c.is_ascii_graphic() && c != ';') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let msg = Message::new("abort")
            .with("isworld", "TRUE")
            .with("exitcode", exit_code)
            .with("msg", &message)
            .with("message", &message);
        let sent = self.conn.send_v2("abort", &msg);
        self.conn.close();
        sent
    }

    fn found_value(op: &'static str, answer: &Message) -> Result<Option<String>, BootstrapError> {
        match answer.get("found") {
            Some(f) if f.eq_ignore_ascii_case("true") => answer
                .get("value")
                .map(|v| Some(v.to_owned()))
                .ok_or_else(|| BootstrapError::Protocol {
                    op,
                    detail: "found=TRUE without a value".into(),
                }),
            Some(_) => Ok(None),
            None => Ok(answer.get("value").map(str::to_owned)),
        }
    }

    fn check(
        &self,
        op: &'static str,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), BootstrapError> {
        let invalid = |what, text: &str, reason: String| BootstrapError::Invalid {
            op,
            what,
            text: shorten(text),
            reason,
        };
        check_key(key).map_err(|e| invalid("key", key, e.to_string()))?;
        if key.len() > MAX_KEY_LEN {
            return Err(invalid("key", key, format!("is longer than {MAX_KEY_LEN}")));
        }
        if let Some(value) = value {
            check_value(value).map_err(|e| invalid("value", value, e.to_string()))?;
            if value.len() > MAX_VALUE_LEN {
                return Err(invalid(
                    "value",
                    value,
                    format!("is longer than {MAX_VALUE_LEN}"),
                ));
            }
        }
        Ok(())
    }
}
