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
    /// The callers of `copy` and `delete` in another language's convention (MPICH's Fortran
    /// library sets them with `MPII_Keyval_set_proxy` for keyvals made from Fortran).
    proxy: Option<(CopyProxy, DeleteProxy)>,
    extra: usize,
    freed: bool,
    /// Delete callbacks of this keyval running now (their attribute is already gone from
    /// the store but still holds the keyval until the callback returns).
    deleting: u32,
}

/// MPICH's copy callback caller (`MPII_Attr_copy_proxy`): the program's function, the
/// object's handle, the keyval, `extra_state`, the attribute's [`AttrType`], its value, where
/// the copy goes and the flag.
pub type CopyProxy = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    c_int,
    *mut c_void,
    c_int,
    *mut c_void,
    *mut *mut c_void,
    *mut c_int,
) -> c_int;
/// MPICH's delete callback caller (`MPII_Attr_delete_proxy`): the program's function, the
/// object's handle, the keyval, the attribute's [`AttrType`], its value and `extra_state`.
pub type DeleteProxy =
    unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, *mut c_void, *mut c_void) -> c_int;

/// How an attribute is set or read (MPICH's `MPIR_Attr_type`): from C as a pointer, or from
/// Fortran as an address-sized integer (`MPI_Comm_set_attr`) or a default integer
/// (`MPI_Attr_put`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrType {
    /// C: `void *` (`MPIR_ATTR_PTR`, 0).
    Ptr,
    /// Fortran `INTEGER(KIND=MPI_ADDRESS_KIND)` (`MPIR_ATTR_AINT`, 1).
    Aint,
    /// Fortran `INTEGER` (`MPIR_ATTR_INT`, 3).
    Int,
}

impl AttrType {
    /// The type of MPICH's code `code`, if it is one.
    pub fn from_code(code: c_int) -> Option<Self> {
        match code {
            0 => Some(AttrType::Ptr),
            1 => Some(AttrType::Aint),
            3 => Some(AttrType::Int),
            _ => None,
        }
    }

    fn code(self) -> c_int {
        match self {
            AttrType::Ptr => 0,
            AttrType::Aint => 1,
            AttrType::Int => 3,
        }
    }
}

/// An attribute's value. One set from Fortran is an integer, kept in a box of its own so that
/// C reads it through a pointer that stays valid while the attribute is set (MPI-4.1 19.3.7:
/// C gets the address of the value Fortran stored; Fortran gets the pointer C stored as an
/// integer).
#[derive(Clone)]
enum Value {
    Ptr(usize),
    Int(AttrType, Box<isize>),
}

impl Value {
    fn new(v: usize, ty: AttrType) -> Self {
        match ty {
            AttrType::Ptr => Value::Ptr(v),
            ty => Value::Int(ty, Box::new(v as isize)),
        }
    }

    /// What C reads: the pointer set from C, or the address of the integer set from Fortran.
    fn as_ptr(&self) -> usize {
        match self {
            Value::Ptr(v) => *v,
            Value::Int(_, b) => &**b as *const isize as usize,
        }
    }

    /// What Fortran reads, and what a proxy gets: the value itself.
    fn raw(&self) -> usize {
        match self {
            Value::Ptr(v) => *v,
            Value::Int(_, b) => **b as usize,
        }
    }

    /// The value as `out` reads it.
    fn read(&self, out: AttrType) -> usize {
        if out == AttrType::Ptr {
            self.as_ptr()
        } else {
            self.raw()
        }
    }

    fn ty(&self) -> AttrType {
        match self {
            Value::Ptr(_) => AttrType::Ptr,
            Value::Int(ty, _) => *ty,
        }
    }
}

/// The attributes of one object: keyval and value, in the order they were first set (setting
/// one again keeps its place). `MPI_Finalize` deletes `MPI_COMM_SELF`'s in the reverse order
/// (as the standard asks since MPI-2.2); the others are deleted in that order too.
#[derive(Default)]
struct Attrs(Vec<(c_int, Value)>);

impl Attrs {
    fn get(&self, keyval: &c_int) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == keyval).map(|(_, v)| v)
    }

    fn contains_key(&self, keyval: &c_int) -> bool {
        self.get(keyval).is_some()
    }

    fn insert(&mut self, keyval: c_int, value: Value) {
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
fn run_delete(h: Handle, keyval: c_int, value: &Value) -> Result<(), MpiError> {
    let (delete, proxy, extra) = {
        let mut s = store();
        match s.keyvals.get_mut(&keyval) {
            Some(k) => {
                k.deleting += 1;
                (k.delete, k.proxy, k.extra)
            }
            None => return Ok(()),
        }
    };
    let code = match (delete, proxy) {
        // SAFETY: MPICH's Fortran caller of the program's delete function, with the value
        // itself and its type, as `MPII_Attr_delete_proxy` takes them.
        (Some(f), Some((_, p))) => unsafe {
            p(
                f as *mut c_void,
                h,
                keyval,
                value.ty().code(),
                value.raw() as *mut c_void,
                extra as *mut c_void,
            )
        },
        // SAFETY: the program's delete function, called as the standard specifies.
        (Some(f), None) => unsafe {
            f(
                h,
                keyval,
                value.as_ptr() as *mut c_void,
                extra as *mut c_void,
            )
        },
        (None, _) => abi::SUCCESS,
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
                proxy: None,
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

fn set_attr(
    kind: Kind,
    h: Handle,
    keyval: c_int,
    value: *mut c_void,
    ty: AttrType,
) -> Result<(), MpiError> {
    let old = {
        let s = store();
        live(&s, kind, keyval)?;
        s.attrs
            .get(&(kind, h))
            .and_then(|m| m.get(&keyval))
            .cloned()
    };
    if let Some(old) = old {
        run_delete(h, keyval, &old)?;
    }
    store()
        .attrs
        .entry((kind, h))
        .or_default()
        .insert(keyval, Value::new(value as usize, ty));
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

/// The value of `keyval` on `h` as `out` reads it, if set.
fn get_attr(
    kind: Kind,
    h: Handle,
    keyval: c_int,
    out: AttrType,
) -> Result<Option<usize>, MpiError> {
    let s = store();
    known(&s, kind, keyval)?;
    Ok(s.attrs
        .get(&(kind, h))
        .and_then(|m| m.get(&keyval))
        .map(|v| v.read(out)))
}

fn delete_attr(kind: Kind, h: Handle, keyval: c_int) -> Result<(), MpiError> {
    let value = {
        let s = store();
        known(&s, kind, keyval)?;
        s.attrs
            .get(&(kind, h))
            .and_then(|m| m.get(&keyval))
            .cloned()
    };
    // Deleting an attribute that is not set does nothing (as MPICH).
    let Some(value) = value else {
        return Ok(());
    };
    run_delete(h, keyval, &value)?;
    if let Some(m) = store().attrs.get_mut(&(kind, h)) {
        m.remove(&keyval);
    }
    Ok(())
}

/// Runs the copy callbacks of `old`'s attributes and sets those they copy on `new` (for
/// `MPI_Comm_dup`, `MPI_Type_dup`). On a callback's error, the attributes copied so far are
/// deleted again and the error returned.
pub fn copy_all(kind: Kind, old: Handle, new: Handle) -> Result<(), MpiError> {
    type Copy = (c_int, Value, Option<CopyFn>, Option<CopyProxy>, usize);
    let attrs: Vec<Copy> = {
        let s = store();
        let Some(m) = s.attrs.get(&(kind, old)) else {
            return Ok(());
        };
        m.0.iter()
            .filter_map(|(k, v)| {
                let kv = s.keyvals.get(k)?;
                Some((*k, v.clone(), kv.copy, kv.proxy.map(|p| p.0), kv.extra))
            })
            .collect()
    };
    for (keyval, value, copy, proxy, extra) in attrs {
        let Some(f) = copy else { continue };
        let mut out: *mut c_void = std::ptr::null_mut();
        let mut flag: c_int = 0;
        let code = match proxy {
            // SAFETY: MPICH's Fortran caller of the program's copy function, with the value
            // itself and its type and this frame's outputs, as `MPII_Attr_copy_proxy` takes them.
            Some(p) => unsafe {
                p(
                    f as *mut c_void,
                    old,
                    keyval,
                    extra as *mut c_void,
                    value.ty().code(),
                    value.raw() as *mut c_void,
                    &mut out,
                    &mut flag,
                )
            },
            // SAFETY: the program's copy function, called as the standard specifies with this
            // frame's `void *` and int as outputs.
            None => unsafe {
                f(
                    old,
                    keyval,
                    extra as *mut c_void,
                    value.as_ptr() as *mut c_void,
                    (&mut out as *mut *mut c_void).cast(),
                    &mut flag,
                )
            },
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
                .insert(keyval, Value::new(out as usize, value.ty()));
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
        if let Err(e) = run_delete(h, keyval, &value) {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}

/// Sets attribute `keyval` of communicator `comm` (the predefined ones cannot be set), from C
/// (`MPI_Comm_set_attr`, `MPI_Attr_put`) or Fortran (`MPII_Comm_set_attr`).
fn comm_set(comm: Handle, keyval: c_int, value: *mut c_void, ty: AttrType) -> Result<(), MpiError> {
    rt()?.comm_local(comm)?;
    if predefined(keyval) {
        return Err(MpiError::new(
            ERR_KEYVAL,
            format!("predefined attribute {keyval:#x} cannot be set"),
        ));
    }
    set_attr(Kind::Comm, comm, keyval, value, ty)
}

/// Sets attribute `keyval` of window `win` (the predefined ones cannot be set), from C or
/// Fortran.
fn win_set(win: Handle, keyval: c_int, value: *mut c_void, ty: AttrType) -> Result<(), MpiError> {
    crate::win::win(win)?;
    if predefined_win(keyval) {
        return Err(MpiError::new(
            ERR_KEYVAL,
            format!("predefined window attribute {keyval:#x} cannot be set"),
        ));
    }
    set_attr(Kind::Win, win, keyval, value, ty)
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
        comm_set(comm, keyval, attribute_val, AttrType::Ptr)
    }
}

mpi_fn! {
    /// `MPI_Attr_put` (the MPI-1 name of `MPI_Comm_set_attr`).
    MPI_Attr_put / PMPI_Attr_put(comm: Handle, keyval: c_int, attribute_val: *mut c_void) on comm => {
        comm_set(comm, keyval, attribute_val, AttrType::Ptr)
    }
}

/// `MPI_Comm_get_attr`: a predefined attribute (a pointer to its int from C, its value from
/// Fortran) or the program's, read as `out`.
///
/// # Safety
///
/// `attribute_val` is a writable `void *`, `flag` a writable int.
unsafe fn comm_get_attr(
    comm: Handle,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
    out: AttrType,
) -> Result<(), MpiError> {
    rt()?.comm_any(comm)?;
    if flag.is_null() || attribute_val.is_null() {
        return Err(MpiError::new(err::ARG, "attribute_val or flag is NULL"));
    }
    let v: Option<usize> = if predefined(keyval) {
        // Fortran's predefined keyvals are C's plus one (`mpif.h`).
        let keyval = if keyval % 2 == 0 { keyval - 1 } else { keyval };
        let p: Option<&'static c_int> = match keyval {
            abi::KEY_TAG_UB => Some(&PREDEFINED.tag_ub),
            abi::KEY_HOST => Some(&PREDEFINED.host),
            abi::KEY_IO => Some(&PREDEFINED.io),
            abi::KEY_WTIME_IS_GLOBAL => Some(&PREDEFINED.wtime_is_global),
            abi::KEY_APPNUM => Some(&PREDEFINED.appnum),
            _ => None,
        };
        let v = match p {
            Some(p) => Some(p as *const c_int as usize),
            // On MPI_COMM_WORLD only, as the standard says.
            None if keyval == abi::KEY_LASTUSEDCODE && comm == abi::COMM_WORLD => {
                Some(crate::errclass::last_used_ptr())
            }
            None => None,
        };
        match (v, out) {
            (Some(p), AttrType::Aint | AttrType::Int) => {
                // SAFETY: the address of one of the ints above (or of the last used code).
                let value = unsafe { *(p as *const c_int) };
                Some(value as isize as usize)
            }
            (v, _) => v,
        }
    } else {
        get_attr(Kind::Comm, comm, keyval, out)?
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
        unsafe { comm_get_attr(comm, keyval, attribute_val, flag, AttrType::Ptr) }
    }
}

mpi_fn! {
    /// `MPI_Attr_get` (the MPI-1 name of `MPI_Comm_get_attr`).
    MPI_Attr_get / PMPI_Attr_get(comm: Handle, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) on comm => {
        // SAFETY: the caller's pointers, as the standard specifies.
        unsafe { comm_get_attr(comm, keyval, attribute_val, flag, AttrType::Ptr) }
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
        set_attr(Kind::Type, datatype, keyval, attribute_val, AttrType::Ptr)
    }
}

mpi_fn! {
    /// `MPI_Type_get_attr`.
    MPI_Type_get_attr / PMPI_Type_get_attr(datatype: Handle, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) on abi::COMM_WORLD => {
        crate::types::layout(datatype)?;
        if flag.is_null() || attribute_val.is_null() {
            return Err(MpiError::new(err::ARG, "attribute_val or flag is NULL"));
        }
        let v = get_attr(Kind::Type, datatype, keyval, AttrType::Ptr)?;
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
    get_attr(Kind::Win, win, keyval, AttrType::Ptr)
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
        win_set(win, keyval, attribute_val, AttrType::Ptr)
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

/// The object handle of an `MPII_` call (all are `int`s in MPICH's ABI).
fn attr_call(name: &str, errh: Handle, body: impl FnOnce() -> Result<(), MpiError>) -> c_int {
    match body() {
        Ok(()) => abi::SUCCESS,
        Err(e) => crate::error::fail(name, errh, e),
    }
}

/// The attribute type of MPICH's code `code` (`MPI_ERR_ARG` for another).
fn attr_type(code: c_int) -> Result<AttrType, MpiError> {
    AttrType::from_code(code)
        .ok_or_else(|| MpiError::new(err::ARG, format!("{code} is not an attribute type")))
}

/// Writes `v` (if set) and the flag of a `get_attr` call.
///
/// # Safety
///
/// `attribute_val` is a writable `void *` or NULL, `flag` a writable int or NULL.
unsafe fn put_attr(
    attribute_val: *mut c_void,
    flag: *mut c_int,
    v: Option<usize>,
) -> Result<(), MpiError> {
    if flag.is_null() || attribute_val.is_null() {
        return Err(MpiError::new(err::ARG, "attribute_val or flag is NULL"));
    }
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

/// `MPII_Keyval_set_proxy`: MPICH's Fortran library (`libmpichfort.so.12`) calls this after
/// creating a keyval from Fortran, so that the keyval's callbacks are called in Fortran's
/// convention (every argument by reference) through `copy_proxy` and `delete_proxy`.
///
/// # Safety
///
/// The proxies are functions of MPICH's `MPII_Attr_copy_proxy` and `MPII_Attr_delete_proxy`
/// types.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPII_Keyval_set_proxy(
    keyval: c_int,
    copy_proxy: Option<CopyProxy>,
    delete_proxy: Option<DeleteProxy>,
) {
    if let (Some(c), Some(d)) = (copy_proxy, delete_proxy) {
        if let Some(k) = store().keyvals.get_mut(&keyval) {
            k.proxy = Some((c, d));
        }
    }
}

/// `MPII_Comm_set_attr`: `MPI_Comm_set_attr` (and `MPI_Attr_put`) from Fortran: the value
/// is the integer itself, of type `ty` (MPICH's `MPIR_Attr_type`).
///
/// # Safety
///
/// As `MPI_Comm_set_attr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPII_Comm_set_attr(
    comm: Handle,
    keyval: c_int,
    value: *mut c_void,
    ty: c_int,
) -> c_int {
    attr_call("MPI_Comm_set_attr", comm, || {
        comm_set(comm, keyval, value, attr_type(ty)?)
    })
}

/// `MPII_Comm_get_attr`: `MPI_Comm_get_attr` (and `MPI_Attr_get`) from Fortran: a value set
/// from Fortran comes back as itself, one set from C as its pointer's address, a predefined
/// attribute as its value.
///
/// # Safety
///
/// As `MPI_Comm_get_attr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPII_Comm_get_attr(
    comm: Handle,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
    ty: c_int,
) -> c_int {
    attr_call("MPI_Comm_get_attr", comm, || {
        // SAFETY: the caller's pointers, as the standard specifies.
        unsafe { comm_get_attr(comm, keyval, attribute_val, flag, attr_type(ty)?) }
    })
}

/// `MPII_Type_set_attr`: `MPI_Type_set_attr` from Fortran.
///
/// # Safety
///
/// As `MPI_Type_set_attr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPII_Type_set_attr(
    datatype: Handle,
    keyval: c_int,
    value: *mut c_void,
    ty: c_int,
) -> c_int {
    attr_call("MPI_Type_set_attr", abi::COMM_WORLD, || {
        crate::types::layout(datatype)?;
        set_attr(Kind::Type, datatype, keyval, value, attr_type(ty)?)
    })
}

/// `MPII_Type_get_attr`: `MPI_Type_get_attr` from Fortran.
///
/// # Safety
///
/// As `MPI_Type_get_attr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPII_Type_get_attr(
    datatype: Handle,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
    ty: c_int,
) -> c_int {
    attr_call("MPI_Type_get_attr", abi::COMM_WORLD, || {
        crate::types::layout(datatype)?;
        let v = get_attr(Kind::Type, datatype, keyval, attr_type(ty)?)?;
        // SAFETY: the caller's pointers, as the standard specifies.
        unsafe { put_attr(attribute_val, flag, v) }
    })
}

/// `MPII_Win_set_attr`: `MPI_Win_set_attr` from Fortran.
///
/// # Safety
///
/// As `MPI_Win_set_attr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPII_Win_set_attr(
    win: Handle,
    keyval: c_int,
    value: *mut c_void,
    ty: c_int,
) -> c_int {
    attr_call("MPI_Win_set_attr", win, || {
        win_set(win, keyval, value, attr_type(ty)?)
    })
}

/// `MPII_Win_get_attr`: `MPI_Win_get_attr` from Fortran: the predefined attributes as values
/// (`MPI_WIN_BASE` the base address, `MPI_WIN_SIZE` the size, ...), the program's as
/// `MPII_Comm_get_attr` gives them.
///
/// # Safety
///
/// As `MPI_Win_get_attr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPII_Win_get_attr(
    win: Handle,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
    ty: c_int,
) -> c_int {
    let out = match attr_type(ty) {
        Ok(t) => t,
        Err(e) => return crate::error::fail("MPI_Win_get_attr", win, e),
    };
    if !predefined_win(keyval) || out == AttrType::Ptr {
        return attr_call("MPI_Win_get_attr", win, || {
            crate::win::win(win)?;
            let v = get_attr(Kind::Win, win, keyval, out)?;
            // SAFETY: the caller's pointers, as the standard specifies.
            unsafe { put_attr(attribute_val, flag, v) }
        });
    }
    // Fortran's predefined keyvals are C's plus one (`mpif.h`).
    let c_keyval = if keyval % 2 == 0 { keyval - 1 } else { keyval };
    let mut p: *mut c_void = std::ptr::null_mut();
    let mut found: c_int = 0;
    // SAFETY: this frame's `void *` and int as the outputs.
    let code =
        unsafe { crate::win::PMPI_Win_get_attr(win, c_keyval, (&raw mut p).cast(), &mut found) };
    if code != abi::SUCCESS {
        return code;
    }
    let v = (found != 0).then(|| match c_keyval {
        // The base is the value in C too.
        0x6600_0001 => p as usize,
        // SAFETY: MPI_Win_get_attr's pointer to the window's size (an `MPI_Aint`).
        0x6600_0003 => (unsafe { *(p as *const isize) }) as usize,
        // SAFETY: MPI_Win_get_attr's pointer to one of the window's ints.
        _ => (unsafe { *(p as *const c_int) }) as isize as usize,
    });
    attr_call("MPI_Win_get_attr", win, || {
        // SAFETY: the caller's pointers, as the standard specifies.
        unsafe { put_attr(attribute_val, flag, v) }
    })
}
