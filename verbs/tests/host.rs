//! Tests that need no RDMA device: on a machine without one they check the "none" paths; on a
//! machine with devices they check the listing is consistent.

use std::ffi::CStr;

use viaduct_verbs::{Context, Endpoint, Error, Gid, Mtu, RemoteRegion, Status, device};

#[test]
fn device_list_matches_names_and_is_empty_without_rdma() {
    let names = device::names().expect("listing devices must not fail");
    let infos = device::list().expect("summarising devices must not fail");
    assert_eq!(names.len(), infos.len());
    if names.is_empty() {
        println!("no RDMA device: list() returned an empty list, as it must");
    } else {
        for info in &infos {
            println!("{info}");
            assert!(names.contains(&info.name));
            assert!(!info.ports.is_empty(), "{} has no port", info.name);
        }
    }
}

#[test]
fn opening_a_missing_device_names_the_problem() {
    let names = device::names().unwrap();
    let err = Context::open("no-such-device-0").expect_err("no device has this name");
    let text = err.to_string();
    println!("open(\"no-such-device-0\") -> {text}");
    if names.is_empty() {
        assert!(matches!(err, Error::NoDevice), "{err:?}");
        assert!(text.contains("no RDMA device on this machine"), "{text}");
        let first = Context::open_first().expect_err("no device at all");
        assert!(matches!(first, Error::NoDevice), "{first:?}");
    } else {
        assert!(matches!(err, Error::UnknownDevice { .. }), "{err:?}");
        assert!(text.contains("no-such-device-0"), "{text}");
        for n in &names {
            assert!(text.contains(n.as_str()), "{text} does not list {n}");
        }
    }
}

#[test]
fn status_messages_match_libibverbs() {
    for s in Status::ALL {
        // SAFETY: ibv_wc_status_str returns a static NUL-terminated string for any value.
        let c = unsafe { CStr::from_ptr(rdma_sys::ibv_wc_status_str(s.to_raw())) };
        assert_eq!(s.message(), c.to_str().unwrap(), "status {}", s.to_raw());
        assert_eq!(Status::from_raw(s.to_raw()), s);
    }
    assert_eq!(Status::from_raw(999), Status::Unknown(999));
    println!(
        "all {} ibv_wc_status values map both ways with libibverbs' text",
        Status::ALL.len()
    );
}

#[test]
fn endpoint_round_trips_and_rejects_garbage() {
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[12..].copy_from_slice(&[127, 0, 0, 1]);
    let e = Endpoint {
        qp_num: 0x11,
        psn: 0xabcdef,
        lid: 7,
        gid: Gid(gid),
        port: 1,
        mtu: Mtu::Mtu1024,
    };
    let b = e.to_bytes();
    assert_eq!(Endpoint::from_bytes(&b).unwrap(), e);
    assert_eq!(e.gid.ipv4(), Some(std::net::Ipv4Addr::LOCALHOST));
    assert!(Endpoint::from_bytes(&b[..31]).is_err());
    let mut bad = b;
    bad[0] = 9;
    assert!(Endpoint::from_bytes(&bad).is_err());
    let mut bad = b;
    bad[2] = 0;
    assert!(Endpoint::from_bytes(&bad).is_err());
    // Reserved bytes (and the PSN's unused top byte) must stay zero.
    for i in [3, 11, 14, 15] {
        let mut bad = b;
        bad[i] = 1;
        let e = Endpoint::from_bytes(&bad).expect_err("a reserved byte set is taken");
        assert!(e.to_string().contains(&format!("byte {i} is 0x01")), "{e}");
    }
    println!("endpoint {e:?} round-trips through {} bytes", b.len());
}

#[test]
fn remote_region_round_trips_and_slices() {
    let r = RemoteRegion {
        addr: 0x1000,
        len: 4096,
        rkey: 0x55,
    };
    assert_eq!(RemoteRegion::from_bytes(&r.to_bytes()).unwrap(), r);
    assert!(RemoteRegion::from_bytes(&[0; 3]).is_err());
    let s = r.slice(100, 200).unwrap();
    assert_eq!((s.addr, s.len, s.rkey), (0x1064, 200, 0x55));
    assert!(r.slice(4000, 97).is_err());
    assert!(r.slice(u64::MAX, 2).is_err());
    println!("remote region round-trips; out-of-range slices are refused");
}

#[test]
fn mtu_bytes() {
    assert_eq!(Mtu::Mtu256.bytes(), 256);
    assert_eq!(Mtu::Mtu1024.bytes(), 1024);
    assert_eq!(Mtu::Mtu4096.bytes(), 4096);
}
