//! The network interfaces of this host and their IPv4 addresses (`getifaddrs`), for choosing
//! the address a listener binds to.
//!
//! ```
//! let all = viaduct_fallback::netif::interfaces().expect("getifaddrs");
//! assert!(all.iter().any(|i| i.loopback), "every host has a loopback interface");
//! ```

use std::ffi::CStr;
use std::net::Ipv4Addr;

/// One network interface.
///
/// ```
/// use viaduct_fallback::netif::interfaces;
/// for i in interfaces()?.iter().filter(|i| i.up && !i.loopback) {
///     println!("{}: {:?}", i.name, i.ipv4);
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Its name, e.g. `eth0`, `ib0`.
    pub name: String,
    /// Its IPv4 addresses, in the order the kernel lists them (empty when it has none).
    pub ipv4: Vec<Ipv4Addr>,
    /// Whether it is administratively up (`IFF_UP`).
    pub up: bool,
    /// Whether it is a loopback interface (`IFF_LOOPBACK`).
    pub loopback: bool,
}

/// Every interface of this host (of this process's network namespace), in the kernel's order,
/// with its IPv4 addresses.
///
/// ```
/// use viaduct_fallback::netif::interfaces;
/// let all = interfaces()?;
/// assert!(all.iter().filter(|i| i.loopback).all(|i| i.ipv4.iter().all(|a| a.is_loopback())));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn interfaces() -> std::io::Result<Vec<Interface>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid out-pointer; on success the list it receives is freed below
    // with freeifaddrs, exactly once.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut out: Vec<Interface> = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a non-null node of the list getifaddrs returned, not yet freed.
        let entry = unsafe { &*cur };
        cur = entry.ifa_next;
        if entry.ifa_name.is_null() {
            continue;
        }
        // SAFETY: `ifa_name` is a non-null, NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(entry.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let flags = entry.ifa_flags;
        let addr = if entry.ifa_addr.is_null() {
            None
        } else {
            // SAFETY: `ifa_addr` is non-null and points to a sockaddr of the list; its family
            // field is valid for every family.
            let family = unsafe { (*entry.ifa_addr).sa_family };
            (i32::from(family) == libc::AF_INET).then(|| {
                // SAFETY: the family is AF_INET, so the address is a sockaddr_in; read
                // unaligned in case the list does not align it.
                let sin =
                    unsafe { std::ptr::read_unaligned(entry.ifa_addr.cast::<libc::sockaddr_in>()) };
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))
            })
        };
        let i = match out.iter().position(|i| i.name == name) {
            Some(i) => i,
            None => {
                out.push(Interface {
                    name,
                    ipv4: Vec::new(),
                    up: false,
                    loopback: false,
                });
                out.len() - 1
            }
        };
        let iface = &mut out[i];
        iface.up |= flags & libc::IFF_UP as u32 != 0;
        iface.loopback |= flags & libc::IFF_LOOPBACK as u32 != 0;
        if let Some(a) = addr {
            iface.ipv4.push(a);
        }
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once; no reference into
    // the list outlives this point (names and addresses were copied).
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_127_0_0_1() {
        let all = interfaces().unwrap();
        let lo = all
            .iter()
            .find(|i| i.loopback)
            .expect("a loopback interface");
        assert!(lo.up, "{lo:?}");
        assert!(lo.ipv4.contains(&Ipv4Addr::LOCALHOST), "{lo:?}");
        let mut names: Vec<&str> = all.iter().map(|i| i.name.as_str()).collect();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "each interface listed once: {all:?}");
    }
}
