//! PMI-1 client: the protocol of MPICH's hydra `mpiexec` and of `viaduct launch`.
//!
//! Exchange order: (`PMI_PORT` only) `initack pmiid=ID` answered by `initack` and three
//! `set` lines (size, rank, debug); then `init pmi_version=1 pmi_subversion=1`, `get_maxes`,
//! `get_my_kvsname`; then any number of `put` / `barrier_in` / `get`; then `finalize`.
//! Every answer is awaited at most the connection's timeout.

use std::time::Duration;

use super::conn::{Conn, PmiSocket, check_rc, int_field, to_u32};
use super::error::BootstrapError;
use super::fd::adopt_inherited_fd;
use super::wire::{Message, check_key, check_value};

/// The server's limits from `get_maxes`.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_pmi::pmi1::Pmi1Client;
/// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = Pmi1Server::start(ServerConfig::new(1))?;
/// # let addr = server.addr().to_string();
/// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
/// let maxes = client.maxes();
/// assert!(maxes.key > 0 && maxes.value > 0);
/// # client.finalize()?;
/// # server.shutdown();
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maxes {
    /// Longest key-value space name.
    pub kvsname: usize,
    /// Longest key.
    pub key: usize,
    /// Longest value.
    pub value: usize,
}

/// A PMI-1 client connection, initialised.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_pmi::pmi1::Pmi1Client;
/// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = Pmi1Server::start(ServerConfig::new(1))?;
/// # let addr = server.addr().to_string();
/// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
/// client.put("k", "v")?;
/// client.barrier()?;
/// assert_eq!(client.get("k")?.as_deref(), Some("v"));
/// # client.finalize()?;
/// # server.shutdown();
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Pmi1Client {
    conn: Conn,
    rank: u32,
    size: u32,
    kvsname: String,
    maxes: Maxes,
    finalized: bool,
}

impl Pmi1Client {
    /// Takes over the inherited socket `fd` (hydra's `PMI_FD`) and initialises; rank and size
    /// come from the environment (`PMI_RANK`, `PMI_SIZE`).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use viaduct_pmi::pmi1::Pmi1Client;
    ///
    /// fn main() -> Result<(), Box<dyn std::error::Error>> {
    ///     // Under hydra: the inherited socket and the rank/size it passed.
    ///     let var = |name: &str| std::env::var(name);
    ///     let (fd, rank, size) = (var("PMI_FD")?.parse()?, var("PMI_RANK")?.parse()?, var("PMI_SIZE")?.parse()?);
    ///     let client = Pmi1Client::from_fd(fd, rank, size, Duration::from_secs(60))?;
    ///     println!("rank {} of {}", client.rank(), client.size());
    ///     Ok(())
    /// }
    /// ```
    pub fn from_fd(
        fd: i32,
        rank: u32,
        size: u32,
        timeout: Duration,
    ) -> Result<Self, BootstrapError> {
        let stream = adopt_inherited_fd(fd)?;
        let conn = Conn::new(PmiSocket::Unix(stream), timeout)?;
        Self::init(conn, rank, size)
    }

    /// Connects to `addr` (`PMI_PORT`), presents `id` (`PMI_ID`), learns rank and size from the
    /// server and checks them against the environment's `rank`/`size` when given.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi1::Pmi1Client;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let addr = server.addr().to_string();
    /// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
    /// assert_eq!((client.rank(), client.size()), (0, 1));
    /// # client.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn connect(
        addr: &str,
        id: u32,
        env_rank: Option<u32>,
        env_size: Option<u32>,
        timeout: Duration,
    ) -> Result<Self, BootstrapError> {
        let mut conn = Conn::connect_tcp(addr, timeout)?;
        let op = "initack";
        conn.send_v1(op, &Message::new("initack").with("pmiid", id))?;
        let ack = conn.expect_v1(op, "initack")?;
        check_rc(op, &ack)?;
        let (mut rank, mut size) = (None, None);
        // hydra sends size, rank and debug, each as its own `set` line.
        for _ in 0..3 {
            let set = conn.expect_v1(op, "set")?;
            if set.get("size").is_some() {
                size = Some(to_u32(op, "size", int_field(op, &set, "size")?)?);
            } else if set.get("rank").is_some() {
                rank = Some(to_u32(op, "rank", int_field(op, &set, "rank")?)?);
            }
        }
        let missing = |what: &str| BootstrapError::Protocol {
            op,
            detail: format!("the server's initack gave no {what}"),
        };
        let rank = rank.ok_or_else(|| missing("rank"))?;
        let size = size.ok_or_else(|| missing("size"))?;
        for (what, from_env, from_server) in [("rank", env_rank, rank), ("size", env_size, size)] {
            if let Some(from_env) = from_env.filter(|e| *e != from_server) {
                return Err(BootstrapError::Mismatch {
                    what,
                    from_env,
                    from_server,
                });
            }
        }
        Self::init(conn, rank, size)
    }

    fn init(mut conn: Conn, rank: u32, size: u32) -> Result<Self, BootstrapError> {
        if rank >= size {
            return Err(BootstrapError::Protocol {
                op: "init",
                detail: format!("rank {rank} is not below size {size}"),
            });
        }
        let op = "init";
        conn.send_v1(
            op,
            &Message::new("init")
                .with("pmi_version", 1)
                .with("pmi_subversion", 1),
        )?;
        let answer = conn.expect_v1(op, "response_to_init")?;
        check_rc(op, &answer)?;

        let op = "get_maxes";
        conn.send_v1(op, &Message::new("get_maxes"))?;
        let answer = conn.expect_v1(op, "maxes")?;
        check_rc(op, &answer)?;
        let limit = |key| -> Result<usize, BootstrapError> {
            let v = int_field(op, &answer, key)?;
            usize::try_from(v)
                .ok()
                .filter(|v| *v > 0)
                .ok_or_else(|| BootstrapError::Protocol {
                    op,
                    detail: format!("{key}={v} is not a usable limit"),
                })
        };
        let maxes = Maxes {
            kvsname: limit("kvsname_max")?,
            key: limit("keylen_max")?,
            value: limit("vallen_max")?,
        };

        let op = "get_my_kvsname";
        conn.send_v1(op, &Message::new("get_my_kvsname"))?;
        let answer = conn.expect_v1(op, "my_kvsname")?;
        check_rc(op, &answer)?;
        let kvsname = answer
            .get("kvsname")
            .ok_or_else(|| BootstrapError::Protocol {
                op,
                detail: "cmd=my_kvsname has no kvsname".into(),
            })?
            .to_owned();

        Ok(Self {
            conn,
            rank,
            size,
            kvsname,
            maxes,
            finalized: false,
        })
    }

    /// This process's rank.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi1::Pmi1Client;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let addr = server.addr().to_string();
    /// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
    /// assert_eq!(client.rank(), 0);
    /// # client.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of ranks in the job.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi1::Pmi1Client;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let addr = server.addr().to_string();
    /// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
    /// assert_eq!(client.size(), 1);
    /// # client.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The key-value space's name.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi1::Pmi1Client;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let addr = server.addr().to_string();
    /// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
    /// assert_eq!(client.kvsname(), server.kvsname());
    /// # client.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// The server's limits.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi1::Pmi1Client;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let addr = server.addr().to_string();
    /// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
    /// println!("keys up to {} bytes", client.maxes().key);
    /// # client.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn maxes(&self) -> Maxes {
        self.maxes
    }

    /// Stores `value` under `key`; visible to other ranks after the next [`Self::barrier`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi1::Pmi1Client;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let addr = server.addr().to_string();
    /// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
    /// client.put("card-0", "value")?;
    /// client.barrier()?;
    /// # client.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        let op = "put";
        self.check(op, key, Some(value))?;
        let msg = Message::new("put")
            .with("kvsname", &self.kvsname)
            .with("key", key)
            .with("value", value);
        self.conn.send_v1(op, &msg)?;
        let answer = self.conn.expect_v1(op, "put_result")?;
        check_rc(op, &answer)
    }

    /// Waits until every rank has entered the barrier; commits the puts made before it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi1::Pmi1Client;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let addr = server.addr().to_string();
    /// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
    /// client.barrier()?;
    /// # client.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn barrier(&mut self) -> Result<(), BootstrapError> {
        let op = "barrier";
        self.conn.send_v1(op, &Message::new("barrier_in"))?;
        let answer = self.conn.expect_v1(op, "barrier_out")?;
        check_rc(op, &answer)
    }

    /// The value stored under `key`, or `None` when the server does not have it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi1::Pmi1Client;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let addr = server.addr().to_string();
    /// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
    /// assert_eq!(client.get("missing")?, None);
    /// # client.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn get(&mut self, key: &str) -> Result<Option<String>, BootstrapError> {
        let op = "get";
        self.check(op, key, None)?;
        let msg = Message::new("get")
            .with("kvsname", &self.kvsname)
            .with("key", key);
        self.conn.send_v1(op, &msg)?;
        let answer = self.conn.expect_v1(op, "get_result")?;
        let found = answer
            .get("found")
            .is_none_or(|f| !f.eq_ignore_ascii_case("false"));
        let rc_ok = matches!(answer.get_int("rc"), None | Some(Ok(0)));
        if !found || !rc_ok {
            // PMI-1 servers report a missing key as rc=-1 (msg=key_..._not_found).
            return Ok(None);
        }
        answer
            .get("value")
            .map(|v| Some(v.to_owned()))
            .ok_or_else(|| BootstrapError::Protocol {
                op,
                detail: "cmd=get_result with rc=0 has no value".into(),
            })
    }

    /// Tells the server this process is done with PMI.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi1::Pmi1Client;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let addr = server.addr().to_string();
    /// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
    /// client.barrier()?;
    /// client.finalize()?; // once; later calls do nothing
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn finalize(&mut self) -> Result<(), BootstrapError> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        let op = "finalize";
        self.conn.send_v1(op, &Message::new("finalize"))?;
        let answer = self.conn.expect_v1(op, "finalize_ack");
        self.conn.close();
        check_rc(op, &answer?)
    }

    /// Asks the server to end the whole job with `exit_code`. No answer is awaited.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi1::Pmi1Client;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let addr = server.addr().to_string();
    /// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
    /// client.abort(3, "bad input")?;
    /// # client.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn abort(&mut self, exit_code: i32, message: &str) -> Result<(), BootstrapError> {
        self.finalized = true;
        // A PMI-1 value cannot hold spaces.
        let message: String = message
            .chars()
            .map(|c| if c.is_ascii_graphic() { c } else { '_' })
            .collect();
        let mut msg = Message::new("abort").with("exitcode", exit_code);
        if !message.is_empty() {
            msg = msg.with("message", message);
        }
        let sent = self.conn.send_v1("abort", &msg);
        self.conn.close();
        sent
    }

    /// The limit on each wait.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_pmi::pmi1::Pmi1Client;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let addr = server.addr().to_string();
    /// let mut client = Pmi1Client::connect(&addr, 0, None, None, Duration::from_secs(30))?;
    /// assert_eq!(client.timeout(), Duration::from_secs(30));
    /// # client.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn timeout(&self) -> Duration {
        self.conn.timeout()
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
            text: super::wire::shorten(text),
            reason,
        };
        check_key(key).map_err(|e| invalid("key", key, e.to_string()))?;
        if key.len() > self.maxes.key {
            return Err(invalid(
                "key",
                key,
                format!("is longer than the server's limit of {}", self.maxes.key),
            ));
        }
        if let Some(value) = value {
            check_value(value).map_err(|e| invalid("value", value, e.to_string()))?;
            if value.len() > self.maxes.value {
                return Err(invalid(
                    "value",
                    value,
                    format!("is longer than the server's limit of {}", self.maxes.value),
                ));
            }
        }
        Ok(())
    }
}
