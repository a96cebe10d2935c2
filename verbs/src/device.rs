//! RDMA devices: listing, opening, attributes of the device and its ports, and the GID table.
//!
//! [`list`] is the one-call summary of every device on the machine (ports with state, MTU, link
//! layer and LID; GIDs with index, type and address) as plain data. On a machine without RDMA
//! support it returns an empty list, not an error.

use std::ffi::CStr;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use rdma_sys as sys;

use crate::error::{Error, Result, last_os_error};

/// The raw handles of a device list, freed on drop.
struct DeviceList {
    list: *mut *mut sys::ibv_device,
    len: usize,
}

impl DeviceList {
    fn get() -> Result<Self> {
        let mut n: libc::c_int = 0;
        // SAFETY: ibv_get_device_list writes the count into `n` and returns an array or NULL.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        if list.is_null() {
            let err = last_os_error();
            // Without kernel RDMA support libibverbs reports ENOSYS (or ENOENT for a missing
            // sysfs class): that is "no devices", not a failure.
            return match err.raw_os_error() {
                Some(libc::ENOSYS) | Some(libc::ENOENT) | Some(0) | None => Ok(Self {
                    list: std::ptr::null_mut(),
                    len: 0,
                }),
                _ => Err(Error::ListDevices(err)),
            };
        }
        Ok(Self {
            list,
            len: usize::try_from(n).unwrap_or(0),
        })
    }

    fn devices(&self) -> &[*mut sys::ibv_device] {
        if self.list.is_null() || self.len == 0 {
            return &[];
        }
        // SAFETY: libibverbs returned an array of `len` device pointers, alive until we free it.
        unsafe { std::slice::from_raw_parts(self.list, self.len) }
    }

    fn name_of(dev: *mut sys::ibv_device) -> String {
        // SAFETY: `dev` comes from a live device list; the name is a NUL-terminated string owned
        // by the device.
        let p = unsafe { sys::ibv_get_device_name(dev) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: non-null, NUL-terminated, lives as long as the list.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    fn names(&self) -> Vec<String> {
        self.devices().iter().map(|d| Self::name_of(*d)).collect()
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        if !self.list.is_null() {
            // SAFETY: the list came from ibv_get_device_list and is freed once.
            unsafe { sys::ibv_free_device_list(self.list) };
        }
    }
}

/// Names of the RDMA devices on this machine (empty when there are none).
///
/// ```
/// use viaduct_verbs::device;
/// for name in device::names().unwrap_or_default() {
///     println!("{name}");
/// }
/// ```
pub fn names() -> Result<Vec<String>> {
    Ok(DeviceList::get()?.names())
}

/// Plain-data summary of every RDMA device on this machine: attributes, ports and GID tables.
///
/// Returns an empty list on a machine without RDMA devices or without kernel RDMA support.
///
/// ```
/// use viaduct_verbs::device;
/// for d in device::list().unwrap_or_default() {
///     print!("{d}"); // the device, its ports and GIDs
/// }
/// ```
pub fn list() -> Result<Vec<DeviceInfo>> {
    let names = names()?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        out.push(Context::open(&name)?.info()?);
    }
    Ok(out)
}

pub(crate) struct ContextInner {
    ctx: *mut sys::ibv_context,
    name: String,
}

// SAFETY: libibverbs contexts may be used from any thread; rdma-core's verbs are thread safe.
unsafe impl Send for ContextInner {}
// SAFETY: as above; shared use goes through thread-safe verbs only.
unsafe impl Sync for ContextInner {}

impl ContextInner {
    pub(crate) fn as_ptr(&self) -> *mut sys::ibv_context {
        self.ctx
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: every object made from this context holds an Arc to it, so all are gone; the
        // context is closed once.
        unsafe { sys::ibv_close_device(self.ctx) };
    }
}

/// An opened RDMA device (`ibv_context`). Cheap to clone; closed when the last clone and the
/// last object made from it are dropped.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// let ctx = Context::open("rxe0")?;
/// let pd = ctx.alloc_pd()?;
/// let cq = ctx.create_cq(64)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("name", &self.inner.name)
            .finish()
    }
}

impl Context {
    /// Opens the device called `name` (for example `rxe0`, `mlx5_0`).
    ///
    /// Fails with [`Error::NoDevice`] when the machine has no RDMA device and with
    /// [`Error::UnknownDevice`] (listing the devices present) when none has that name.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// match Context::open("no-such-device") {
    ///     Err(e) => println!("{e}"), // names the devices present
    ///     Ok(_) => unreachable!(),
    /// }
    /// ```
    pub fn open(name: &str) -> Result<Self> {
        let list = DeviceList::get()?;
        let names = list.names();
        if names.is_empty() {
            return Err(Error::NoDevice);
        }
        let Some(pos) = names.iter().position(|n| n == name) else {
            return Err(Error::UnknownDevice {
                name: name.to_owned(),
                available: names.join(", "),
            });
        };
        Self::open_raw(list.devices()[pos], name)
    }

    /// Opens the first device found (what perftest does without `-d`).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// let ctx = Context::open_first()?;
    /// println!("{}", ctx.name());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_first() -> Result<Self> {
        let list = DeviceList::get()?;
        let Some(&dev) = list.devices().first() else {
            return Err(Error::NoDevice);
        };
        Self::open_raw(dev, &DeviceList::name_of(dev))
    }

    fn open_raw(dev: *mut sys::ibv_device, name: &str) -> Result<Self> {
        // SAFETY: `dev` is from a live device list; the context outlives the list by contract.
        let ctx = unsafe { sys::ibv_open_device(dev) };
        if ctx.is_null() {
            return Err(Error::OpenDevice {
                name: name.to_owned(),
                source: last_os_error(),
            });
        }
        Ok(Self {
            inner: Arc::new(ContextInner {
                ctx,
                name: name.to_owned(),
            }),
        })
    }

    /// The device's name.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// println!("opened {}", ctx.name());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The raw `ibv_context`. It stays owned by this `Context`: do not close it, and do not use
    /// it after the last clone is dropped.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let raw = ctx.as_raw(); // for a libibverbs call of your own
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn as_raw(&self) -> *mut sys::ibv_context {
        self.inner.ctx
    }

    /// Device attributes (`ibv_query_device`).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let a = ctx.attributes()?;
    /// println!("{} ports, up to {} QPs", a.ports, a.max_qp);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn attributes(&self) -> Result<DeviceAttributes> {
        // SAFETY: ibv_device_attr is plain old data; all-zero is a valid value.
        let mut a: sys::ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: live context, valid out-pointer.
        let rc = unsafe { sys::ibv_query_device(self.inner.ctx, &mut a) };
        if rc != 0 {
            return Err(Error::QueryDevice(crate::error::from_code(rc)));
        }
        // SAFETY: fw_ver is a NUL-terminated C string inside the struct (zeroed beforehand).
        let fw = unsafe { CStr::from_ptr(a.fw_ver.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(DeviceAttributes {
            firmware: fw,
            node_guid: u64::from_be(a.node_guid),
            vendor_id: a.vendor_id,
            vendor_part_id: a.vendor_part_id,
            max_mr_size: a.max_mr_size,
            max_qp: a.max_qp,
            max_qp_wr: a.max_qp_wr,
            max_sge: a.max_sge,
            max_cq: a.max_cq,
            max_cqe: a.max_cqe,
            max_mr: a.max_mr,
            max_pd: a.max_pd,
            max_qp_rd_atom: a.max_qp_rd_atom,
            max_qp_init_rd_atom: a.max_qp_init_rd_atom,
            max_srq: a.max_srq,
            ports: a.phys_port_cnt,
        })
    }

    /// Attributes of port `port` (ports count from 1).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let p = ctx.port(1)?;
    /// println!("port 1: {} MTU {}", p.state, p.active_mtu);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn port(&self, port: u8) -> Result<PortAttributes> {
        // SAFETY: ibv_port_attr is plain old data; all-zero is valid.
        let mut p: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: live context, valid out-pointer of the size the inline wrapper passes.
        let rc = unsafe { sys::___ibv_query_port(self.inner.ctx, port, &mut p) };
        if rc != 0 {
            return Err(Error::QueryPort {
                port,
                source: crate::error::from_code(rc),
            });
        }
        Ok(PortAttributes {
            number: port,
            state: PortState::from_raw(p.state),
            max_mtu: Mtu::from_raw(p.max_mtu),
            active_mtu: Mtu::from_raw(p.active_mtu),
            link_layer: LinkLayer::from_raw(p.link_layer),
            lid: p.lid,
            gid_table_len: u32::try_from(p.gid_tbl_len).unwrap_or(0),
            max_msg_size: p.max_msg_sz,
        })
    }

    /// GID `index` of `port` (`ibv_query_gid`).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let gid = ctx.gid(1, 0)?;
    /// println!("{gid}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gid(&self, port: u8, index: u32) -> Result<Gid> {
        // SAFETY: ibv_gid is 16 plain bytes.
        let mut g: sys::ibv_gid = unsafe { std::mem::zeroed() };
        let idx = libc::c_int::try_from(index).unwrap_or(libc::c_int::MAX);
        // SAFETY: live context, valid out-pointer.
        let rc = unsafe { sys::ibv_query_gid(self.inner.ctx, port, idx, &mut g) };
        if rc != 0 {
            return Err(Error::QueryGid {
                port,
                index,
                source: last_os_error(),
            });
        }
        // SAFETY: every bit pattern of the union is a valid `raw` array.
        Ok(Gid(unsafe { g.raw }))
    }

    /// The populated entries of the GID table of `port`, each with its type.
    ///
    /// The type comes from sysfs (`/sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/<i>`),
    /// because rdma-sys 0.3 does not bind `ibv_query_gid_ex`.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// for e in ctx.gids(1)? {
    ///     println!("{} {} {}", e.index, e.gid, e.kind);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gids(&self, port: u8) -> Result<Vec<GidEntry>> {
        let attr = self.port(port)?;
        let mut out = Vec::new();
        for index in 0..attr.gid_table_len {
            let gid = match self.gid(port, index) {
                Ok(g) => g,
                // Holes in a RoCE GID table answer with an error; they are simply unused.
                Err(_) => continue,
            };
            if gid.is_zero() {
                continue;
            }
            let base = format!(
                "/sys/class/infiniband/{}/ports/{port}/gid_attrs",
                self.inner.name
            );
            let kind = std::fs::read_to_string(format!("{base}/types/{index}"))
                .map(|s| GidType::from_sysfs(s.trim(), attr.link_layer))
                .unwrap_or(match attr.link_layer {
                    LinkLayer::InfiniBand => GidType::Ib,
                    _ => GidType::Unknown,
                });
            let netdev = std::fs::read_to_string(format!("{base}/ndevs/{index}"))
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty());
            out.push(GidEntry {
                index,
                gid,
                kind,
                netdev,
            });
        }
        Ok(out)
    }

    /// Picks the GID to address peers with on `port`, as perftest's `-x` would be set by hand:
    /// on Ethernet the first RoCE v2 GID holding an IPv4-mapped address, else the first RoCE v2
    /// GID; on InfiniBand the first GID (index 0).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let e = ctx.choose_gid(1)?;
    /// println!("GID index {} ({})", e.index, e.kind);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn choose_gid(&self, port: u8) -> Result<GidEntry> {
        let attr = self.port(port)?;
        let gids = self.gids(port)?;
        let pick = if attr.link_layer == LinkLayer::InfiniBand {
            gids.first().cloned()
        } else {
            gids.iter()
                .find(|g| g.kind == GidType::RoceV2 && g.gid.ipv4().is_some())
                .or_else(|| gids.iter().find(|g| g.kind == GidType::RoceV2))
                .cloned()
        };
        pick.ok_or_else(|| Error::NoUsableGid {
            device: self.inner.name.clone(),
            port,
            present: if gids.is_empty() {
                "none".to_owned()
            } else {
                gids.iter()
                    .map(|g| format!("{}:{}:{}", g.index, g.kind, g.gid))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        })
    }

    /// Plain-data summary of this device: attributes, every port, every port's GIDs.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// print!("{}", ctx.info()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn info(&self) -> Result<DeviceInfo> {
        let attrs = self.attributes()?;
        let mut ports = Vec::new();
        for n in 1..=attrs.ports {
            let p = self.port(n)?;
            let gids = self.gids(n)?;
            ports.push(PortInfo {
                attributes: p,
                gids,
            });
        }
        Ok(DeviceInfo {
            name: self.inner.name.clone(),
            attributes: attrs,
            ports,
        })
    }
}

/// Device attributes (a subset of `ibv_device_attr`).
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// let a: DeviceAttributes = ctx.attributes()?;
/// println!("firmware {}, max MR {} bytes", a.firmware, a.max_mr_size);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAttributes {
    /// Firmware version text.
    pub firmware: String,
    /// Node GUID (host byte order).
    pub node_guid: u64,
    /// IEEE vendor id.
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Largest memory region, bytes.
    pub max_mr_size: u64,
    /// Most queue pairs.
    pub max_qp: i32,
    /// Most work requests per queue.
    pub max_qp_wr: i32,
    /// Most scatter/gather entries per work request.
    pub max_sge: i32,
    /// Most completion queues.
    pub max_cq: i32,
    /// Most entries per completion queue.
    pub max_cqe: i32,
    /// Most memory regions.
    pub max_mr: i32,
    /// Most protection domains.
    pub max_pd: i32,
    /// Most outstanding RDMA reads/atomics a QP may receive.
    pub max_qp_rd_atom: i32,
    /// Most outstanding RDMA reads/atomics a QP may issue.
    pub max_qp_init_rd_atom: i32,
    /// Most shared receive queues.
    pub max_srq: i32,
    /// Number of physical ports.
    pub ports: u8,
}

/// Logical state of a port.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// if ctx.port(1)?.state != PortState::Active {
///     println!("port 1 is not ready for traffic");
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortState {
    /// No state change.
    Nop,
    /// Link down.
    Down,
    /// Link up, not yet configured.
    Init,
    /// Configured, not yet active.
    Armed,
    /// Ready for traffic.
    Active,
    /// Active, deferring.
    ActiveDefer,
    /// A value this library does not know.
    Unknown(u32),
}

impl PortState {
    fn from_raw(v: u32) -> Self {
        use sys::ibv_port_state::*;
        match v {
            IBV_PORT_NOP => Self::Nop,
            IBV_PORT_DOWN => Self::Down,
            IBV_PORT_INIT => Self::Init,
            IBV_PORT_ARMED => Self::Armed,
            IBV_PORT_ACTIVE => Self::Active,
            IBV_PORT_ACTIVE_DEFER => Self::ActiveDefer,
            other => Self::Unknown(other),
        }
    }
}

impl fmt::Display for PortState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Nop => f.write_str("NOP"),
            Self::Down => f.write_str("DOWN"),
            Self::Init => f.write_str("INIT"),
            Self::Armed => f.write_str("ARMED"),
            Self::Active => f.write_str("ACTIVE"),
            Self::ActiveDefer => f.write_str("ACTIVE_DEFER"),
            Self::Unknown(v) => write!(f, "UNKNOWN({v})"),
        }
    }
}

/// Path MTU of InfiniBand/RoCE.
///
/// ```
/// # use viaduct_verbs::*;
/// assert!(Mtu::Mtu1024 < Mtu::Mtu4096);
/// assert_eq!(Mtu::Mtu4096.to_string(), "4096");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256,
    /// 512 bytes.
    Mtu512,
    /// 1024 bytes.
    Mtu1024,
    /// 2048 bytes.
    Mtu2048,
    /// 4096 bytes.
    Mtu4096,
}

impl Mtu {
    pub(crate) fn from_raw(v: u32) -> Self {
        use sys::ibv_mtu::*;
        match v {
            IBV_MTU_256 => Self::Mtu256,
            IBV_MTU_512 => Self::Mtu512,
            IBV_MTU_2048 => Self::Mtu2048,
            IBV_MTU_4096 => Self::Mtu4096,
            _ => Self::Mtu1024,
        }
    }

    pub(crate) fn to_raw(self) -> u32 {
        use sys::ibv_mtu::*;
        match self {
            Self::Mtu256 => IBV_MTU_256,
            Self::Mtu512 => IBV_MTU_512,
            Self::Mtu1024 => IBV_MTU_1024,
            Self::Mtu2048 => IBV_MTU_2048,
            Self::Mtu4096 => IBV_MTU_4096,
        }
    }

    /// The MTU in bytes.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// assert_eq!(Mtu::Mtu256.bytes(), 256);
    /// assert_eq!(Mtu::Mtu2048.bytes(), 2048);
    /// ```
    pub fn bytes(self) -> u32 {
        256 << (self.to_raw() - 1)
    }
}

impl fmt::Display for Mtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bytes())
    }
}

/// Link layer of a port.
///
/// ```
/// # use viaduct_verbs::*;
/// assert_eq!(LinkLayer::Ethernet.to_string(), "Ethernet"); // RoCE
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkLayer {
    /// Not reported (older drivers; means InfiniBand).
    Unspecified,
    /// InfiniBand.
    InfiniBand,
    /// Ethernet (RoCE, soft-RoCE).
    Ethernet,
    /// A value this library does not know.
    Unknown(u8),
}

impl LinkLayer {
    fn from_raw(v: u8) -> Self {
        match v {
            0 => Self::Unspecified,
            1 => Self::InfiniBand,
            2 => Self::Ethernet,
            o => Self::Unknown(o),
        }
    }
}

impl fmt::Display for LinkLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unspecified => f.write_str("unspecified"),
            Self::InfiniBand => f.write_str("InfiniBand"),
            Self::Ethernet => f.write_str("Ethernet"),
            Self::Unknown(v) => write!(f, "unknown({v})"),
        }
    }
}

/// Port attributes (a subset of `ibv_port_attr`).
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// let p: PortAttributes = ctx.port(1)?;
/// println!("{} LID {} GIDs {}", p.link_layer, p.lid, p.gid_table_len);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAttributes {
    /// Port number (from 1).
    pub number: u8,
    /// Logical state.
    pub state: PortState,
    /// Largest MTU supported.
    pub max_mtu: Mtu,
    /// MTU in use.
    pub active_mtu: Mtu,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// Local identifier (0 on Ethernet).
    pub lid: u16,
    /// Size of the GID table.
    pub gid_table_len: u32,
    /// Largest message, bytes.
    pub max_msg_size: u32,
}

/// A 128-bit global identifier (an IPv6 address, or an IPv4-mapped one on RoCE).
///
/// ```
/// # use viaduct_verbs::*;
/// let gid = Gid(std::net::Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped().octets());
/// assert_eq!(gid.to_string(), "::ffff:10.0.0.1");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// True for the all-zero GID (an unused table entry).
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// assert!(Gid::default().is_zero());
    /// ```
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// use std::net::Ipv4Addr;
    /// let gid = Gid(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped().octets());
    /// assert_eq!(gid.ipv4(), Some(Ipv4Addr::new(10, 0, 0, 1)));
    /// assert_eq!(Gid::default().ipv4(), None);
    /// ```
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        Ipv6Addr::from(self.0).to_ipv4_mapped()
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Ipv6Addr::from(self.0))
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}

/// How a GID is used on the wire.
///
/// ```
/// # use viaduct_verbs::*;
/// assert_eq!(GidType::RoceV2.to_string(), "RoCE v2");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GidType {
    /// InfiniBand.
    Ib,
    /// RoCE v1 (Ethernet, no IP header).
    RoceV1,
    /// RoCE v2 (UDP/IP).
    RoceV2,
    /// Not reported.
    Unknown,
}

impl GidType {
    fn from_sysfs(text: &str, link: LinkLayer) -> Self {
        let t = text.to_ascii_lowercase();
        if t.contains("v2") {
            Self::RoceV2
        } else if t.contains("roce") && link == LinkLayer::Ethernet {
            Self::RoceV1
        } else if t.starts_with("ib") {
            Self::Ib
        } else {
            Self::Unknown
        }
    }
}

impl fmt::Display for GidType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ib => "IB",
            Self::RoceV1 => "RoCE v1",
            Self::RoceV2 => "RoCE v2",
            Self::Unknown => "unknown",
        })
    }
}

/// One populated entry of a port's GID table.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// let e: GidEntry = ctx.choose_gid(1)?;
/// println!("{} on {:?}", e.gid, e.netdev);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidEntry {
    /// Index in the table (what perftest's `-x` takes).
    pub index: u32,
    /// The GID.
    pub gid: Gid,
    /// Its type.
    pub kind: GidType,
    /// The network device it belongs to (RoCE), when sysfs says.
    pub netdev: Option<String>,
}

/// A port and its GIDs.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// for p in ctx.info()?.ports {
///     println!("port {}: {} GIDs", p.attributes.number, p.gids.len());
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Port attributes.
    pub attributes: PortAttributes,
    /// Populated GID entries.
    pub gids: Vec<GidEntry>,
}

/// Plain-data summary of a device, as [`list`] returns it.
///
/// ```
/// for d in viaduct_verbs::device::list().unwrap_or_default() {
///     println!("{}: {} port(s)", d.name, d.ports.len());
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device name (`rxe0`).
    pub name: String,
    /// Device attributes.
    pub attributes: DeviceAttributes,
    /// Its ports, from port 1.
    pub ports: Vec<PortInfo>,
}

impl fmt::Display for DeviceInfo {
    /// Several lines: the device, then each port, then each of its GIDs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: firmware {:?}, node GUID {:016x}, {} port(s)",
            self.name,
            self.attributes.firmware,
            self.attributes.node_guid,
            self.ports.len()
        )?;
        for p in &self.ports {
            let a = &p.attributes;
            writeln!(
                f,
                "  port {}: {} link {} active MTU {} (max {}) LID {}",
                a.number, a.state, a.link_layer, a.active_mtu, a.max_mtu, a.lid
            )?;
            for g in &p.gids {
                write!(f, "    GID[{}] {} {}", g.index, g.kind, g.gid)?;
                if let Some(v4) = g.gid.ipv4() {
                    write!(f, " (IPv4 {v4})")?;
                }
                if let Some(nd) = &g.netdev {
                    write!(f, " on {nd}")?;
                }
                writeln!(f)?;
            }
        }
        Ok(())
    }
}
