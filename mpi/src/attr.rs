//! Attribute caching: keyvals (`MPI_Comm_create_keyval`, `MPI_Type_create_keyval`,
//! `MPI_Win_create_keyval`, the MPI-1 `MPI_Keyval_create`), attributes set, read and deleted on
//! communicators, datatypes and windows, the copy callbacks run by `MPI_Comm_dup`/`MPI_Type_dup`
//! (windows are never duplicated) and the delete callbacks run by `MPI_*_delete_attr`, by
//! overwriting an attribute, by `MPI_Comm_free`/`MPI_Type_free`/`MPI_Win_free` and, for
//! `MPI_COMM_SELF`, by `MPI_Finalize`.
//!
//! `MPI_*_NULL_COPY_FN` and `MPI_*_NULL_DELETE_FN` are NULL pointers in MPICH's `mpi.h`: no
//! copy (the attribute is not copied) and no delete action. `MPI_*_DUP_FN` is `MPIR_Dup_fn`
//! (`crate::symbols`). Callbacks run with no lock held, so they may call MPI themselves.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::abi::{self, Handle, err};
use crate::comm::put;
use crate::error::MpiError;
use crate::state::rt;

/// `MPI_Comm_copy_attr_function` (and `MPI_Type_copy_attr_function`, `MPI_Copy_function`).
pub type CopyFn =
    unsafe extern "C" fn(Handle, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
/// `MPI_Comm_delete_attr_function` (and `MPI_Type_delete_attr_function`,
/// `MPI_Delete_function`).
pub type DeleteFn = unsafe extern "C" fn(Handle, c_int, *mut c_void, *mut c_void) -> c_int;

/// `MPI_KEYVAL_INVALID`.
pub const KEYVAL_INVALID: c_int = 0x2400_0000;
/// `MPI_ERR_KEYVAL`.
pub const ERR_KEYVAL: c_int = 48;
/// First keyval handle given to communicator keyvals (MPICH's kind bits of a keyval).
const FIRST_COMM_KEYVAL: c_int = 0xa440_0000u32 as c_int;
/// First keyval handle given to datatype keyvals.
const FIRST_TYPE_KEYVAL: c_int = 0xa4c0_0000u32 as c_int;
/// First keyval handle given to window keyvals.
const FIRST_WIN_KEYVAL: c_int = 0xa540_0000u32 as c_int;

/// What an attribute hangs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A communicator.
    Comm,
    /// A datatype.
    Type,
    /// A window.
    Win,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Comm => "communicator",
            Kind::Type => "datatype",
            Kind::Win => "window",
        }
    }
}

struct Keyval {
    kind: Kind,
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    extra: usize,
    freed: bool,
    /// Delete callbacks of this keyval running now (their attribute is already gone from
    /// the store but still holds the keyval until the callback returns).
    deleting: u32,
}

/// The attributes of one object: keyval and value, in the order they were first set (setting
/// one again keeps its place). `MPI_Finalize` deletes `MPI_COMM_SELF`'s in the reverse order
/// (as the standard asks since MPI-2.2); the others are deleted in that order too.
#[derive(Default)]
struct Attrs(Vec<(c_int, usize)>);

impl Attrs {
    fn get(&self, keyval: &c_int) -> Option<&usize> {
        self.0.iter().find(|(k, _)| k == keyval).map(|(_, v)| v)
    }

    fn contains_key(&self, keyval: &c_int) -> bool {
        self.get(keyval).is_some()
    }

    fn insert(&mut self, keyval: c_int, value: usize) {
        match self.0.iter_mut().find(|(k, _)| *k == keyval) {
            Some((_, v)) => *v = value,
            None => self.0.push((keyval, value)),
        }
    }

    fn remove(&mut self, keyval: &c_int) {
        self.0.retain(|(k, _)| k != keyval);
    }
}

#[derive(Default)]
struct Store {
    keyvals: HashMap<c_int, Keyval>,
    /// Attributes by object, in the order they were first set.
    attrs: HashMap<(Kind, Handle), Attrs>,
    next_comm: c_int,
    next_type: c_int,
    next_win: c_int,
}

fn store() -> MutexGuard<'static, Store> {
    static STORE: OnceLock<Mutex<Store>> = OnceLock::new();
    STORE
        .get_or_init(|| {
            Mutex::new(Store {
                next_comm: FIRST_COMM_KEYVAL,
                next_type: FIRST_TYPE_KEYVAL,
                next_win: FIRST_WIN_KEYVAL,
                ..Store::default()
            })
        })
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Checks that `keyval` is a live keyval of `kind` (`MPI_ERR_KEYVAL` otherwise).
fn live(s: &Store, kind: Kind, keyval: c_int) -> Result<(), MpiError> {
    match s.keyvals.get(&keyval) {
        Some(k) if k.kind == kind && !k.freed => Ok(()),
        Some(k) if k.kind != kind => Err(MpiError::new(
            ERR_KEYVAL,
            format!(
                "keyval {keyval:#x} is a {} keyval, not a {} keyval",
                k.kind.name(),
                kind.name()
            ),
        )),
        Some(_) => Err(MpiError::new(
            ERR_KEYVAL,
            format!("keyval {keyval:#x} was freed"),
        )),
        None => Err(MpiError::new(
            ERR_KEYVAL,
            if keyval == KEYVAL_INVALID {
                "the keyval is MPI_KEYVAL_INVALID".to_string()
            } else {
                format!(
                    "{keyval:#x} is not a {} keyval of this process",
                    kind.name()
                )
            },
        )),
    }
}

/// A callback's error code as the call's error.
fn callback_error(code: c_int, what: &str) -> MpiError {
    MpiError::new(
        code,
        format!("the {what} callback returned error code {code}"),
    )
}

/// Runs the delete callback of `keyval` for `value` on object `h`.
fn run_delete(h: Handle, keyval: c_int, value: usize) -> Result<(), MpiError> {
    let (delete, extra) = {
        let mut s = store();
        match s.keyvals.get_mut(&keyval) {
            Some(k) => {
                k.deleting += 1;
                (k.delete, k.extra)
            }
            None => return Ok(()),
        }
    };
    let code = match delete {
        // SAFETY: the program's delete function, called as the standard specifies.
        Some(f) => unsafe { f(h, keyval, value as *mut c_void, extra as *mut c_void) },
        None => abi::SUCCESS,
    };
    if let Some(k) = store().keyvals.get_mut(&keyval) {
        k.deleting -= 1;
    }
    if code != abi::SUCCESS {
        return Err(callback_error(code, "attribute delete"));
    }
    Ok(())
}

fn create_keyval(
    kind: Kind,
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> Result<(), MpiError> {
    rt()?;
    if keyval.is_null() {
        return Err(MpiError::new(err::ARG, "keyval is NULL"));
    }
    let h = {
        let mut s = store();
        let next = match kind {
            Kind::Comm => &mut s.next_comm,
            Kind::Type => &mut s.next_type,
            Kind::Win => &mut s.next_win,
        };
        let h = *next;
        *next += 1;
        s.keyvals.insert(
            h,
            Keyval {
                kind,
                copy,
                delete,
                extra: extra as usize,
                freed: false,
                deleting: 0,
            },
        );
        h
    };
    // SAFETY: the caller's int, checked not NULL.
    unsafe { put(keyval, h, "keyval") }
}

fn free_keyval(kind: Kind, keyval: *mut c_int) -> Result<(), MpiError> {
    rt()?;
    // SAFETY: the caller's int.
    let k = unsafe { keyval.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "keyval is NULL"))?;
    {
        let mut s = store();
        // A keyval freed already but still held by an attribute is freed again without
        // effect, as MPICH (whose keyval lives until its last attribute is deleted) does:
        // MPICH's `keyval_double_free` frees one from its own delete callback, then again.
        let held =
            |s: &Store, e: &Keyval| e.deleting > 0 || s.attrs.values().any(|m| m.contains_key(k));
        match s.keyvals.get(k) {
            Some(e) if e.kind == kind && e.freed && held(&s, e) => {}
            _ => live(&s, kind, *k)?,
        }
        // Attributes still set keep their callbacks; the keyval can no longer be used.
        if let Some(e) = s.keyvals.get_mut(k) {
            e.freed = true;
        }
    }
    *k = KEYVAL_INVALID;
    Ok(())
}

fn set_attr(kind: Kind, h: Handle, keyval: c_int, value: *mut c_void) -> Result<(), MpiError> {
    let old = {
        let s = store();
        live(&s, kind, keyval)?;
        s.attrs
            .get(&(kind, h))
            .and_then(|m| m.get(&keyval))
            .copied()
    };
    if let Some(old) = old {
        run_delete(h, keyval, old)?;
    }
    store()
        .attrs
        .entry((kind, h))
        .or_default()
        .insert(keyval, value as usize);
    Ok(())
}

/// Checks that `keyval` is a keyval of `kind`, freed or not: a freed keyval still reads and
/// deletes the attributes set with it (as MPICH, which frees it with its last attribute).
fn known(s: &Store, kind: Kind, keyval: c_int) -> Result<(), MpiError> {
    match s.keyvals.get(&keyval) {
        Some(k) if k.kind == kind => Ok(()),
        _ => live(s, kind, keyval),
    }
}

/// The value of `keyval` on `h`, if set.
fn get_attr(kind: Kind, h: Handle, keyval: c_int) -> Result<Option<usize>, MpiError> {
    let s = store();
    known(&s, kind, keyval)?;
    Ok(s.attrs
        .get(&(kind, h))
        .and_then(|m| m.get(&keyval))
        .copied())
}

fn delete_attr(kind: Kind, h: Handle, keyval: c_int) -> Result<(), MpiError> {
    let value = {
        let s = store();
        known(&s, kind, keyval)?;
        s.attrs
            .get(&(kind, h))
            .and_then(|m| m.get(&keyval))
            .copied()
    };
    // Deleting an attribute that is not set does nothing (as MPICH).
    let Some(value) = value else {
        return Ok(());
    };
    run_delete(h, keyval, value)?;
    if let Some(m) = store().attrs.get_mut(&(kind, h)) {
        m.remove(&keyval);
    }
    Ok(())
}

/// Runs the copy callbacks of `old`'s attributes and sets those they copy on `new` (for
/// `MPI_Comm_dup`, `MPI_Type_dup`). On a callback's error, the attributes copied so far are
/// deleted again and the error returned.
pub fn copy_all(kind: Kind, old: Handle, new: Handle) -> Result<(), MpiError> {
    let attrs: Vec<(c_int, usize, Option<CopyFn>, usize)> = {
        let s = store();
        let Some(m) = s.attrs.get(&(kind, old)) else {
            return Ok(());
        };
        m.0.iter()
            .filter_map(|&(k, v)| s.keyvals.get(&k).map(|kv| (k, v, kv.copy, kv.extra)))
            .collect()
    };
    for (keyval, value, copy, extra) in attrs {
        let Some(f) = copy else { continue };
        let mut out: *mut c_void = std::ptr::null_mut();
        let mut flag: c_int = 0;
        // SAFETY: the program's copy function, called as the standard specifies with this
        // frame's `void *` and int as outputs.
        let code = unsafe {
            f(
                old,
                keyval,
                extra as *mut c_void,
                value as *mut c_void,
                (&mut out as *mut *mut c_void).cast(),
                &mut flag,
            )
        };
        if code != abi::SUCCESS {
            let _ = delete_all(kind, new);
            return Err(callback_error(code, "attribute copy"));
        }
        if flag != 0 {
            store()
                .attrs
                .entry((kind, new))
                .or_default()
                .insert(keyval, out as usize);
        }
    }
    Ok(())
}

/// Runs the delete callbacks of every attribute of `h` and forgets them (for `MPI_Comm_free`,
/// `MPI_Type_free`, `MPI_Finalize`); the first callback error is returned after all ran.
pub fn delete_all(kind: Kind, h: Handle) -> Result<(), MpiError> {
    let attrs = store().attrs.remove(&(kind, h)).unwrap_or_default();
    let mut first = Ok(());
    for (keyval, value) in attrs.0.into_iter().rev() {
        if let Err(e) = run_delete(h, keyval, value) {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}

/// Values of the predefined attributes (`MPI_TAG_UB`, ...): the pointer `MPI_Comm_get_attr`
/// gives back points into this.
struct Predefined {
    tag_ub: c_int,
    host: c_int,
    io: c_int,
    wtime_is_global: c_int,
    appnum: c_int,
}

static PREDEFINED: Predefined = Predefined {
    tag_ub: abi::TAG_UB,
    host: abi::PROC_NULL,
    io: abi::ANY_SOURCE,
    wtime_is_global: 0,
    appnum: 0,
};

/// Whether `keyval` is one of the predefined communicator keyvals of `mpi.h` (kind bits
/// `0x644`).
fn predefined(keyval: c_int) -> bool {
    keyval as u32 & 0xfff0_0000 == 0x6440_0000
}

mpi_fn! {
    /// `MPI_Comm_create_keyval`.
    MPI_Comm_create_keyval / PMPI_Comm_create_keyval(copy_fn: Option<CopyFn>, delete_fn: Option<DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void) on abi::COMM_WORLD => {
        create_keyval(Kind::Comm, copy_fn, delete_fn, keyval, extra_state)
    }
}

mpi_fn! {
    /// `MPI_Keyval_create` (the MPI-1 name of `MPI_Comm_create_keyval`).
    MPI_Keyval_create / PMPI_Keyval_create(copy_fn: Option<CopyFn>, delete_fn: Option<DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void) on abi::COMM_WORLD => {
        create_keyval(Kind::Comm, copy_fn, delete_fn, keyval, extra_state)
    }
}

mpi_fn! {
    /// `MPI_Comm_free_keyval`: the keyval becomes `MPI_KEYVAL_INVALID`; attributes set with it
    /// stay until deleted (their delete callback still runs).
    MPI_Comm_free_keyval / PMPI_Comm_free_keyval(keyval: *mut c_int) on abi::COMM_WORLD => {
        free_keyval(Kind::Comm, keyval)
    }
}

mpi_fn! {
    /// `MPI_Keyval_free` (the MPI-1 name of `MPI_Comm_free_keyval`).
    MPI_Keyval_free / PMPI_Keyval_free(keyval: *mut c_int) on abi::COMM_WORLD => {
        free_keyval(Kind::Comm, keyval)
    }
}

mpi_fn! {
    /// `MPI_Comm_set_attr`: runs the delete callback of a value it replaces.
    MPI_Comm_set_attr / PMPI_Comm_set_attr(comm: Handle, keyval: c_int, attribute_val: *mut c_void) on comm => {
        rt()?.comm_local(comm)?;
        if predefined(keyval) {
            return Err(MpiError::new(ERR_KEYVAL, format!("predefined attribute {keyval:#x} cannot be set")));
        }
        set_attr(Kind::Comm, comm, keyval, attribute_val)
    }
}

mpi_fn! {
    /// `MPI_Attr_put` (the MPI-1 name of `MPI_Comm_set_attr`).
    MPI_Attr_put / PMPI_Attr_put(comm: Handle, keyval: c_int, attribute_val: *mut c_void) on comm => {
        rt()?.comm_local(comm)?;
        if predefined(keyval) {
            return Err(MpiError::new(ERR_KEYVAL, format!("predefined attribute {keyval:#x} cannot be set")));
        }
        set_attr(Kind::Comm, comm, keyval, attribute_val)
    }
}

/// `MPI_Comm_get_attr`: a predefined attribute (a pointer to its int) or the program's.
///
/// # Safety
///
/// `attribute_val` is a writable `void *`, `flag` a writable int.
unsafe fn comm_get_attr(
    comm: Handle,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> Result<(), MpiError> {
    rt()?.comm_any(comm)?;
    if flag.is_null() || attribute_val.is_null() {
        return Err(MpiError::new(err::ARG, "attribute_val or flag is NULL"));
    }
    let v: Option<usize> = if predefined(keyval) {
        let p: Option<&'static c_int> = match keyval {
            abi::KEY_TAG_UB => Some(&PREDEFINED.tag_ub),
            abi::KEY_HOST => Some(&PREDEFINED.host),
            abi::KEY_IO => Some(&PREDEFINED.io),
            abi::KEY_WTIME_IS_GLOBAL => Some(&PREDEFINED.wtime_is_global),
            abi::KEY_APPNUM => Some(&PREDEFINED.appnum),
            _ => None,
        };
        match p {
            Some(p) => Some(p as *const c_int as usize),
            // On MPI_COMM_WORLD only, as the standard says.
            None if keyval == abi::KEY_LASTUSEDCODE && comm == abi::COMM_WORLD => {
                Some(crate::errclass::last_used_ptr())
            }
            None => None,
        }
    } else {
        get_attr(Kind::Comm, comm, keyval)?
    };
    // SAFETY: the caller's flag and `void **` attribute value, checked not NULL.
    unsafe {
        put(flag, c_int::from(v.is_some()), "flag")?;
        if let Some(v) = v {
            put(
                attribute_val.cast::<*mut c_void>(),
                v as *mut c_void,
                "attribute_val",
            )?;
        }
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Comm_get_attr`: the predefined attributes `MPI_TAG_UB`, `MPI_HOST`, `MPI_IO`,
    /// `MPI_WTIME_IS_GLOBAL`, `MPI_APPNUM` (0), `MPI_LASTUSEDCODE` (on `MPI_COMM_WORLD`; other
    /// predefined ones: flag 0, as MPICH gives for `MPI_UNIVERSE_SIZE`) and the program's.
    MPI_Comm_get_attr / PMPI_Comm_get_attr(comm: Handle, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) on comm => {
        // SAFETY: the caller's pointers, as the standard specifies.
        unsafe { comm_get_attr(comm, keyval, attribute_val, flag) }
    }
}

mpi_fn! {
    /// `MPI_Attr_get` (the MPI-1 name of `MPI_Comm_get_attr`).
    MPI_Attr_get / PMPI_Attr_get(comm: Handle, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) on comm => {
        // SAFETY: the caller's pointers, as the standard specifies.
        unsafe { comm_get_attr(comm, keyval, attribute_val, flag) }
    }
}

mpi_fn! {
    /// `MPI_Comm_delete_attr`: runs the delete callback.
    MPI_Comm_delete_attr / PMPI_Comm_delete_attr(comm: Handle, keyval: c_int) on comm => {
        rt()?.comm_local(comm)?;
        if predefined(keyval) {
            return Err(MpiError::new(ERR_KEYVAL, format!("predefined attribute {keyval:#x} cannot be deleted")));
        }
        delete_attr(Kind::Comm, comm, keyval)
    }
}

mpi_fn! {
    /// `MPI_Attr_delete` (the MPI-1 name of `MPI_Comm_delete_attr`).
    MPI_Attr_delete / PMPI_Attr_delete(comm: Handle, keyval: c_int) on comm => {
        rt()?.comm_local(comm)?;
        if predefined(keyval) {
            return Err(MpiError::new(ERR_KEYVAL, format!("predefined attribute {keyval:#x} cannot be deleted")));
        }
        delete_attr(Kind::Comm, comm, keyval)
    }
}

mpi_fn! {
    /// `MPI_Type_create_keyval`.
    MPI_Type_create_keyval / PMPI_Type_create_keyval(copy_fn: Option<CopyFn>, delete_fn: Option<DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void) on abi::COMM_WORLD => {
        create_keyval(Kind::Type, copy_fn, delete_fn, keyval, extra_state)
    }
}

mpi_fn! {
    /// `MPI_Type_free_keyval`.
    MPI_Type_free_keyval / PMPI_Type_free_keyval(keyval: *mut c_int) on abi::COMM_WORLD => {
        free_keyval(Kind::Type, keyval)
    }
}

mpi_fn! {
    /// `MPI_Type_set_attr` (predefined and derived datatypes).
    MPI_Type_set_attr / PMPI_Type_set_attr(datatype: Handle, keyval: c_int, attribute_val: *mut c_void) on abi::COMM_WORLD => {
        crate::types::layout(datatype)?;
        set_attr(Kind::Type, datatype, keyval, attribute_val)
    }
}

mpi_fn! {
    /// `MPI_Type_get_attr`.
    MPI_Type_get_attr / PMPI_Type_get_attr(datatype: Handle, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) on abi::COMM_WORLD => {
        crate::types::layout(datatype)?;
        if flag.is_null() || attribute_val.is_null() {
            return Err(MpiError::new(err::ARG, "attribute_val or flag is NULL"));
        }
        let v = get_attr(Kind::Type, datatype, keyval)?;
        // SAFETY: the caller's flag and `void **` attribute value, checked not NULL.
        unsafe {
            put(flag, c_int::from(v.is_some()), "flag")?;
            if let Some(v) = v {
                put(attribute_val.cast::<*mut c_void>(), v as *mut c_void, "attribute_val")?;
            }
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Type_delete_attr`.
    MPI_Type_delete_attr / PMPI_Type_delete_attr(datatype: Handle, keyval: c_int) on abi::COMM_WORLD => {
        crate::types::layout(datatype)?;
        delete_attr(Kind::Type, datatype, keyval)
    }
}

/// Whether `keyval` is one of the predefined window keyvals of `mpi.h` (`MPI_WIN_BASE`, ...:
/// kind bits `0x660`).
fn predefined_win(keyval: c_int) -> bool {
    keyval as u32 & 0xfff0_0000 == 0x6600_0000
}

/// The value of the program's window attribute `keyval` on `win`, if set (for
/// `MPI_Win_get_attr`, which answers the predefined ones itself).
pub(crate) fn win_attr(win: Handle, keyval: c_int) -> Result<Option<usize>, MpiError> {
    get_attr(Kind::Win, win, keyval)
}

mpi_fn! {
    /// `MPI_Win_create_keyval` (the copy function is kept; windows are never duplicated).
    MPI_Win_create_keyval / PMPI_Win_create_keyval(copy_fn: Option<CopyFn>, delete_fn: Option<DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void) on abi::COMM_WORLD => {
        create_keyval(Kind::Win, copy_fn, delete_fn, keyval, extra_state)
    }
}

mpi_fn! {
    /// `MPI_Win_free_keyval`: the keyval becomes `MPI_KEYVAL_INVALID`; attributes set with it
    /// stay until deleted (their delete callback still runs).
    MPI_Win_free_keyval / PMPI_Win_free_keyval(keyval: *mut c_int) on abi::COMM_WORLD => {
        free_keyval(Kind::Win, keyval)
    }
}

mpi_fn! {
    /// `MPI_Win_set_attr`: runs the delete callback of a value it replaces; the predefined
    /// window attributes cannot be set (`MPI_ERR_KEYVAL`).
    MPI_Win_set_attr / PMPI_Win_set_attr(win: Handle, keyval: c_int, attribute_val: *mut c_void) on win => {
        crate::win::win(win)?;
        if predefined_win(keyval) {
            return Err(MpiError::new(ERR_KEYVAL, format!("predefined window attribute {keyval:#x} cannot be set")));
        }
        set_attr(Kind::Win, win, keyval, attribute_val)
    }
}

mpi_fn! {
    /// `MPI_Win_delete_attr`: runs the delete callback (its error fails the call and keeps
    /// the attribute).
    MPI_Win_delete_attr / PMPI_Win_delete_attr(win: Handle, keyval: c_int) on win => {
        crate::win::win(win)?;
        if predefined_win(keyval) {
            return Err(MpiError::new(ERR_KEYVAL, format!("predefined window attribute {keyval:#x} cannot be deleted")));
        }
        delete_attr(Kind::Win, win, keyval)
    }
}
