//! Smaller parts of the interface: user error handlers (`MPI_Comm_create_errhandler`,
//! `MPI_Comm_call_errhandler`), `MPI_Info` objects, communicator names,
//! `MPI_Comm_split_type`, `MPI_Get_address`, `MPI_Comm_test_inter`
//! (intercommunicators are in `inter`).

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::abi::{self, Handle, MpiAint, err};
use crate::comm::put;
use crate::error::MpiError;
use crate::state::rt;

/// `MPI_Comm_errhandler_function`: `void (MPI_Comm *, int *, ...)`.
pub type CommErrFn = unsafe extern "C" fn(*mut Handle, *mut c_int, ...);

fn handlers() -> &'static Mutex<HashMap<Handle, CommErrFn>> {
    static H: OnceLock<Mutex<HashMap<Handle, CommErrFn>>> = OnceLock::new();
    H.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The C type of a file error handler (`MPI_File_errhandler_function`): the file handle is a
/// pointer in MPICH's ABI.
pub type FileErrFn = unsafe extern "C" fn(*mut *mut c_void, *mut c_int, ...);

/// File error handlers of `MPI_File_create_errhandler` (numbered from the same counter as the
/// others).
fn file_handlers() -> &'static Mutex<HashMap<Handle, FileErrFn>> {
    static H: OnceLock<Mutex<HashMap<Handle, FileErrFn>>> = OnceLock::new();
    H.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Registers file error handler `f`; gives its handle.
pub fn add_file_handler(f: FileErrFn) -> Handle {
    let h = NEXT_HANDLER.fetch_add(1, Ordering::Relaxed);
    file_handlers()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(h, f);
    hold_handler(h);
    h
}

/// The program's function behind file error handler `h`, if it is one.
pub fn file_handler(h: Handle) -> Option<FileErrFn> {
    file_handlers()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&h)
        .copied()
}

/// Calls file error handler `f` for file `fh` (`NULL`: `MPI_FILE_NULL`) with `code`; returns
/// the code as the handler left it (a handler may change it, to `MPI_SUCCESS` say, as in
/// MPICH).
pub fn call_file_handler(f: FileErrFn, handler: Handle, fh: *mut c_void, code: c_int) -> c_int {
    let (mut h, mut k) = (fh, code);
    if let Some(k) = call_cxx(handler, 1, (&raw mut h).cast(), f as *const c_void, code) {
        return k;
    }
    // SAFETY: the program's error handler, called with a file handle and an error code as
    // MPI_File_errhandler_function specifies (no further arguments).
    unsafe { f(&mut h, &mut k) };
    k
}

/// First handle of a user error handler (MPICH's kind bits of an error handler, indirect).
const FIRST_HANDLER: Handle = 0x9400_0000u32 as Handle;
static NEXT_HANDLER: AtomicI32 = AtomicI32::new(FIRST_HANDLER);

/// The program's function behind error handler `h`, if it is a user handler.
pub fn user_handler(h: Handle) -> Option<CommErrFn> {
    handlers()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&h)
        .copied()
}

/// Calls user error handler `f` for `comm` (a communicator, window or session) with `code`;
/// returns the code as the handler left it (a handler may change it, to `MPI_SUCCESS` say, as
/// in MPICH).
pub fn call_user_handler(f: CommErrFn, handler: Handle, comm: Handle, code: c_int) -> c_int {
    let (mut c, mut k) = (comm, code);
    let kind = if comm as u32 & 0xff00_0000 == crate::win::WIN_KIND {
        2
    } else {
        0
    };
    if let Some(k) = call_cxx(handler, kind, (&raw mut c).cast(), f as *const c_void, code) {
        return k;
    }
    // SAFETY: the program's error handler, called with a communicator and an error code as
    // MPI_Comm_errhandler_function specifies (no further arguments).
    unsafe { f(&mut c, &mut k) };
    k
}

mpi_fn! {
    /// `MPI_Comm_create_errhandler`.
    MPI_Comm_create_errhandler / PMPI_Comm_create_errhandler(comm_errhandler_fn: Option<CommErrFn>, errhandler: *mut Handle) on abi::COMM_WORLD => {
        let f = comm_errhandler_fn.ok_or_else(|| MpiError::new(err::ARG, "the error handler function is NULL"))?;
        if errhandler.is_null() {
            return Err(MpiError::new(err::ARG, "errhandler is NULL"));
        }
        let h = NEXT_HANDLER.fetch_add(1, Ordering::Relaxed);
        handlers().lock().unwrap_or_else(|e| e.into_inner()).insert(h, f);
        hold_handler(h);
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(errhandler, h, "errhandler") }
    }
}

mpi_fn! {
    /// `MPI_Comm_call_errhandler`: runs the communicator's error handler with `errorcode`.
    MPI_Comm_call_errhandler / PMPI_Comm_call_errhandler(comm: Handle, errorcode: c_int) on comm => {
        rt()?.comm_local(comm)?;
        crate::error::raise_exact(
            "MPI_Comm_call_errhandler",
            comm,
            MpiError::new(errorcode, "raised by MPI_Comm_call_errhandler"),
        );
        Ok(())
    }
}

/// Whether `h` is an error handler a communicator may take.
pub fn valid_handler(h: Handle) -> bool {
    matches!(
        h,
        abi::ERRORS_ARE_FATAL
            | abi::ERRORS_RETURN
            | abi::ERRORS_ABORT
            | abi::ERRORS_THROW_EXCEPTIONS
    ) || (user_handler(h).is_some() && is_held(h))
}

/// MPICH's C++ library's caller of a C++ error handler (`MPIR_Call_errhandler_function`):
/// the object's kind (0 communicator, 1 file, 2 window), a pointer to its handle, a pointer to
/// the code, and the program's function.
pub type CxxErrCall = unsafe extern "C" fn(c_int, *mut c_void, *mut c_int, *const c_void);

/// User error handlers made by MPICH's C++ library, with its caller.
fn cxx_handlers() -> &'static Mutex<HashMap<Handle, CxxErrCall>> {
    static H: OnceLock<Mutex<HashMap<Handle, CxxErrCall>>> = OnceLock::new();
    H.get_or_init(|| Mutex::new(HashMap::new()))
}

/// `MPII_Errhandler_set_cxx`: MPICH's C++ library calls this after `MPI_*_create_errhandler`
/// for a handler made by `MPI::Comm/Win/File::Create_errhandler`, whose function (a C++
/// function taking a reference to the object) must be called through `call`.
///
/// # Safety
///
/// `call` is MPICH's `MPIR_Call_errhandler_function` of the C++ library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPII_Errhandler_set_cxx(errhandler: Handle, call: Option<CxxErrCall>) {
    if let Some(call) = call {
        cxx_handlers()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(errhandler, call);
    }
}

/// Calls the C++ caller of handler `h` for object `obj` (`kind` as [`CxxErrCall`]) with
/// function `f` and `code`, if `h` is a C++ handler; then `MPI_SUCCESS`, as MPICH returns
/// after a C++ handler (the C++ library throws where it must; the call returns no code).
fn call_cxx(
    h: Handle,
    kind: c_int,
    obj: *mut c_void,
    f: *const c_void,
    code: c_int,
) -> Option<c_int> {
    let call = *cxx_handlers()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&h)?;
    let mut k = code;
    // SAFETY: MPICH's C++ caller, with a pointer to the object's handle, to the code and the
    // program's function, as `MPIR_Call_errhandler_function` takes them.
    unsafe { call(kind, obj, &mut k, f) };
    Some(abi::SUCCESS)
}

/// The program's handles to each user error handler: one from its creation and one from each
/// `MPI_*_get_errhandler` that returned it, less those `MPI_Errhandler_free` dropped. A handler
/// whose handles are all freed keeps its function for the objects that still hold it, but may
/// not be attached to new objects or freed again. Handles are never reused.
fn handler_refs() -> &'static Mutex<HashMap<Handle, u32>> {
    static F: OnceLock<Mutex<HashMap<Handle, u32>>> = OnceLock::new();
    F.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Whether the program holds a handle to user error handler `h`.
fn is_held(h: Handle) -> bool {
    handler_refs()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&h)
        .is_some_and(|&n| n > 0)
}

/// Counts one more program handle to `h` (creation, `MPI_*_get_errhandler`); predefined
/// handlers are not counted.
pub fn hold_handler(h: Handle) {
    if user_handler(h).is_some() || file_handler(h).is_some() {
        *handler_refs()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(h)
            .or_insert(0) += 1;
    }
}

/// Whether `h` is a file error handler the program may still attach (not freed).
pub fn live_file_handler(h: Handle) -> bool {
    file_handler(h).is_some() && is_held(h)
}

/// Drops one program handle to user error handler `h` (`MPI_Errhandler_free`); objects that
/// hold the handler keep calling it. Predefined handlers stay. False: `h` is no error handler
/// or all its handles were freed already.
pub fn free_handler(h: Handle) -> bool {
    if matches!(
        h,
        abi::ERRORS_ARE_FATAL
            | abi::ERRORS_RETURN
            | abi::ERRORS_ABORT
            | abi::ERRORS_THROW_EXCEPTIONS
    ) {
        return true;
    }
    match handler_refs()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_mut(&h)
    {
        Some(n) if *n > 0 => {
            *n -= 1;
            true
        }
        _ => false,
    }
}

/// The key/value pairs of one `MPI_Info`, in the order set.
pub(crate) type Pairs = Vec<(String, String)>;

/// `MPI_Info` objects.
fn infos() -> &'static Mutex<HashMap<Handle, Pairs>> {
    static I: OnceLock<Mutex<HashMap<Handle, Pairs>>> = OnceLock::new();
    I.get_or_init(|| Mutex::new(HashMap::new()))
}

const FIRST_INFO: Handle = 0x9c00_0000u32 as Handle;
static NEXT_INFO: AtomicI32 = AtomicI32::new(FIRST_INFO);
/// `MPI_INFO_ENV`: predefined, empty here.
const INFO_ENV: Handle = 0x5c00_0001;
const MAX_INFO_KEY: usize = 255;
const MAX_INFO_VAL: usize = 1024;

/// The C string at `p`.
///
/// # Safety
///
/// `p` is NULL or a NUL-terminated string.
pub(crate) unsafe fn string(p: *const c_char, what: &str) -> Result<String, MpiError> {
    if p.is_null() {
        return Err(MpiError::new(err::ARG, format!("{what} is NULL")));
    }
    // SAFETY: the caller's NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Copies `s` (cut to `max - 1` bytes) and a NUL into `out`.
///
/// # Safety
///
/// `out` holds `max` writable bytes (`max >= 1`).
pub(crate) unsafe fn put_c(s: &str, out: *mut c_char, max: usize) {
    if out.is_null() || max == 0 {
        return;
    }
    let n = s.len().min(max - 1);
    // SAFETY: the caller's buffer of `max` bytes; `n + 1 <= max`.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), out.cast::<u8>(), n);
        *out.add(n) = 0;
    }
}

/// Runs `f` on the pairs of info object `h` (none for the environment's info);
/// `MPI_ERR_INFO` when `h` is no info object.
pub(crate) fn with_info<T>(h: Handle, f: impl FnOnce(&mut Pairs) -> T) -> Result<T, MpiError> {
    if h == INFO_ENV {
        return Ok(f(&mut Vec::new()));
    }
    let mut t = infos().lock().unwrap_or_else(|e| e.into_inner());
    let v = t
        .get_mut(&h)
        .ok_or_else(|| MpiError::new(28, format!("{h:#x} is not an info object")))?;
    Ok(f(v))
}

fn check_key(k: &str) -> Result<(), MpiError> {
    if k.is_empty() || k.len() > MAX_INFO_KEY {
        return Err(MpiError::new(
            29,
            format!("info key of {} bytes (1 to {MAX_INFO_KEY})", k.len()),
        ));
    }
    Ok(())
}

/// A new, empty info object.
pub fn new_info() -> Handle {
    let h = NEXT_INFO.fetch_add(1, Ordering::Relaxed);
    infos()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(h, Vec::new());
    h
}

/// A new info object holding `pairs`.
pub(crate) fn info_with(pairs: &[(&str, String)]) -> Handle {
    let h = NEXT_INFO.fetch_add(1, Ordering::Relaxed);
    let v = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    infos()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(h, v);
    h
}

mpi_fn! {
    /// `MPI_Info_create`.
    MPI_Info_create / PMPI_Info_create(info: *mut Handle) on abi::COMM_WORLD => {
        if info.is_null() {
            return Err(MpiError::new(err::ARG, "info is NULL"));
        }
        let h = NEXT_INFO.fetch_add(1, Ordering::Relaxed);
        infos().lock().unwrap_or_else(|e| e.into_inner()).insert(h, Vec::new());
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(info, h, "info") }
    }
}

mpi_fn! {
    /// `MPI_Info_free`.
    MPI_Info_free / PMPI_Info_free(info: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's handle.
        let h = unsafe { info.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "info is NULL"))?;
        infos().lock().unwrap_or_else(|e| e.into_inner()).remove(h)
            .ok_or_else(|| MpiError::new(28, format!("{:#x} is not an info object", *h)))?;
        *h = 0x1c00_0000;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Info_dup`.
    MPI_Info_dup / PMPI_Info_dup(info: Handle, newinfo: *mut Handle) on abi::COMM_WORLD => {
        let copy = with_info(info, |v| v.clone())?;
        if newinfo.is_null() {
            return Err(MpiError::new(err::ARG, "newinfo is NULL"));
        }
        let h = NEXT_INFO.fetch_add(1, Ordering::Relaxed);
        infos().lock().unwrap_or_else(|e| e.into_inner()).insert(h, copy);
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newinfo, h, "newinfo") }
    }
}

mpi_fn! {
    /// `MPI_Info_set`.
    MPI_Info_set / PMPI_Info_set(info: Handle, key: *const c_char, value: *const c_char) on abi::COMM_WORLD => {
        // SAFETY: the caller's strings.
        let (k, v) = unsafe { (string(key, "key")?, string(value, "value")?) };
        check_key(&k)?;
        if v.len() > MAX_INFO_VAL {
            return Err(MpiError::new(30, format!("info value of {} bytes (at most {MAX_INFO_VAL})", v.len())));
        }
        with_info(info, |pairs| match pairs.iter_mut().find(|(kk, _)| *kk == k) {
            Some(p) => p.1 = v,
            None => pairs.push((k, v)),
        })
    }
}

mpi_fn! {
    /// `MPI_Info_delete`.
    MPI_Info_delete / PMPI_Info_delete(info: Handle, key: *const c_char) on abi::COMM_WORLD => {
        // SAFETY: the caller's string.
        let k = unsafe { string(key, "key") }?;
        let found = with_info(info, |pairs| {
            let before = pairs.len();
            pairs.retain(|(kk, _)| *kk != k);
            pairs.len() != before
        })?;
        if !found {
            return Err(MpiError::new(31, format!("info key {k:?} is not set")));
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Info_get`.
    MPI_Info_get / PMPI_Info_get(info: Handle, key: *const c_char, valuelen: c_int, value: *mut c_char, flag: *mut c_int) on abi::COMM_WORLD => {
        // SAFETY: the caller's string.
        let k = unsafe { string(key, "key") }?;
        check_key(&k)?;
        let v = with_info(info, |pairs| pairs.iter().find(|(kk, _)| *kk == k).map(|p| p.1.clone()))?;
        // SAFETY: the caller's flag and buffer of `valuelen + 1` bytes.
        unsafe {
            put(flag, c_int::from(v.is_some()), "flag")?;
            if let Some(v) = v {
                put_c(&v, value, valuelen.max(0) as usize + 1);
            }
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Info_get_valuelen`.
    MPI_Info_get_valuelen / PMPI_Info_get_valuelen(info: Handle, key: *const c_char, valuelen: *mut c_int, flag: *mut c_int) on abi::COMM_WORLD => {
        // SAFETY: the caller's string.
        let k = unsafe { string(key, "key") }?;
        let v = with_info(info, |pairs| pairs.iter().find(|(kk, _)| *kk == k).map(|p| p.1.len()))?;
        // SAFETY: the caller's ints.
        unsafe {
            put(flag, c_int::from(v.is_some()), "flag")?;
            if let Some(n) = v {
                put(valuelen, n as c_int, "valuelen")?;
            }
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Info_get_nkeys`.
    MPI_Info_get_nkeys / PMPI_Info_get_nkeys(info: Handle, nkeys: *mut c_int) on abi::COMM_WORLD => {
        let n = with_info(info, |pairs| pairs.len())?;
        // SAFETY: the caller's int.
        unsafe { put(nkeys, n as c_int, "nkeys") }
    }
}

mpi_fn! {
    /// `MPI_Info_get_nthkey`.
    MPI_Info_get_nthkey / PMPI_Info_get_nthkey(info: Handle, n: c_int, key: *mut c_char) on abi::COMM_WORLD => {
        let k = with_info(info, |pairs| usize::try_from(n).ok().and_then(|i| pairs.get(i)).map(|p| p.0.clone()))?;
        let k = k.ok_or_else(|| MpiError::new(err::ARG, format!("info has no key number {n}")))?;
        // SAFETY: the caller's buffer of MPI_MAX_INFO_KEY + 1 bytes.
        unsafe { put_c(&k, key, MAX_INFO_KEY + 1) };
        Ok(())
    }
}

fn names() -> &'static Mutex<HashMap<Handle, String>> {
    static N: OnceLock<Mutex<HashMap<Handle, String>>> = OnceLock::new();
    N.get_or_init(|| Mutex::new(HashMap::new()))
}

/// `MPI_MAX_OBJECT_NAME`.
const MAX_OBJECT_NAME: usize = 128;

mpi_fn! {
    /// `MPI_Comm_set_name`.
    MPI_Comm_set_name / PMPI_Comm_set_name(comm: Handle, comm_name: *const c_char) on comm => {
        rt()?.comm_local(comm)?;
        // SAFETY: the caller's string.
        let n = unsafe { string(comm_name, "comm_name") }?;
        names().lock().unwrap_or_else(|e| e.into_inner()).insert(comm, n);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_get_name` (`MPI_COMM_WORLD` and `MPI_COMM_SELF` are named so by default).
    MPI_Comm_get_name / PMPI_Comm_get_name(comm: Handle, comm_name: *mut c_char, resultlen: *mut c_int) on comm => {
        rt()?.comm_local(comm)?;
        let n = names().lock().unwrap_or_else(|e| e.into_inner()).get(&comm).cloned();
        let n = n.unwrap_or_else(|| match comm {
            abi::COMM_WORLD => "MPI_COMM_WORLD".into(),
            abi::COMM_SELF => "MPI_COMM_SELF".into(),
            _ => String::new(),
        });
        if comm_name.is_null() {
            return Err(MpiError::new(err::ARG, "comm_name is NULL"));
        }
        // SAFETY: the caller's buffer of MPI_MAX_OBJECT_NAME bytes and int.
        unsafe {
            put_c(&n, comm_name, MAX_OBJECT_NAME);
            put(resultlen, n.len().min(MAX_OBJECT_NAME - 1) as c_int, "resultlen")
        }
    }
}

mpi_fn! {
    /// `MPI_Comm_split_type`: see [`crate::comm::split_type`].
    MPI_Comm_split_type / PMPI_Comm_split_type(comm: Handle, split_type: c_int, key: c_int, info: Handle, newcomm: *mut Handle) on comm => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::split_type(comm, split_type, key, info, newcomm) }
    }
}

mpi_fn! {
    /// `MPI_Get_address`: the address itself.
    MPI_Get_address / PMPI_Get_address(location: *const c_void, address: *mut MpiAint) on abi::COMM_WORLD => {
        // SAFETY: the caller's MPI_Aint.
        unsafe { put(address, location as MpiAint, "address") }
    }
}

mpi_fn! {
    /// `MPI_Comm_test_inter`: true for an intercommunicator.
    MPI_Comm_test_inter / PMPI_Comm_test_inter(comm: Handle, flag: *mut c_int) on comm => {
        let c = rt()?.comm_local(comm)?;
        // SAFETY: the caller's int.
        unsafe { put(flag, c_int::from(c.inter.is_some()), "flag") }
    }
}

mpi_fn! {
    /// `MPI_Info_get_string` (MPI 4.0): the value cut to `*buflen - 1` bytes and a NUL;
    /// `*buflen` becomes the value's length plus one.
    MPI_Info_get_string / PMPI_Info_get_string(info: Handle, key: *const c_char, buflen: *mut c_int, value: *mut c_char, flag: *mut c_int) on abi::COMM_WORLD => {
        // SAFETY: the caller's string.
        let k = unsafe { string(key, "key") }?;
        check_key(&k)?;
        // SAFETY: the caller's int.
        let len = unsafe { buflen.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "buflen is NULL"))?;
        if *len < 0 {
            return Err(MpiError::new(err::ARG, format!("buflen {} is negative", *len)));
        }
        if flag.is_null() {
            return Err(MpiError::new(err::ARG, "flag is NULL"));
        }
        let v = with_info(info, |pairs| pairs.iter().find(|(kk, _)| *kk == k).map(|p| p.1.clone()))?;
        // SAFETY: the caller's flag (checked) and buffer of `*buflen` bytes.
        unsafe {
            *flag = c_int::from(v.is_some());
            if let Some(v) = v {
                if *len > 0 {
                    put_c(&v, value, *len as usize);
                }
                *len = c_int::try_from(v.len() + 1).unwrap_or(c_int::MAX);
            }
        }
        Ok(())
    }
}

/// A new info object holding `pairs`.
pub(crate) fn info_of(pairs: Pairs) -> Handle {
    let h = NEXT_INFO.fetch_add(1, Ordering::Relaxed);
    infos()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(h, pairs);
    h
}

mpi_fn! {
    /// `MPI_Info_create_env` (MPI 4.0; callable before `MPI_Init`): `command` (the program,
    /// `argv[0]`) and `argv` (the other arguments, separated by spaces) when given.
    MPI_Info_create_env / PMPI_Info_create_env(argc: c_int, argv: *const *const c_char, info: *mut Handle) on abi::COMM_WORLD => {
        if info.is_null() {
            return Err(MpiError::new(err::ARG, "info is NULL"));
        }
        let mut args = Vec::new();
        if !argv.is_null() {
            for i in 0..argc.max(0) as usize {
                // SAFETY: the caller's array of `argc` strings.
                let p = unsafe { *argv.add(i) };
                if p.is_null() {
                    break;
                }
                // SAFETY: a NUL-terminated string of the caller's array.
                args.push(unsafe { string(p, "argv") }?);
            }
        }
        let mut pairs = Pairs::new();
        if let Some((command, rest)) = args.split_first() {
            pairs.push(("command".into(), command.clone()));
            if !rest.is_empty() {
                pairs.push(("argv".into(), rest.join(" ")));
            }
        }
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(info, info_of(pairs), "info") }
    }
}

/// Sets `pairs` in `kept`: a key already there takes the new value, a new key goes last.
pub(crate) fn merge_hints(kept: &mut Pairs, pairs: Pairs) {
    for (k, v) in pairs {
        match kept.iter_mut().find(|(kk, _)| *kk == k) {
            Some(p) => p.1 = v,
            None => kept.push((k, v)),
        }
    }
}

/// The pairs of `pairs` whose key is one of `keys` (hints an object knows; others are ignored).
pub(crate) fn only_known(pairs: Pairs, keys: &[(&str, &str)]) -> Pairs {
    pairs
        .into_iter()
        .filter(|(k, _)| keys.iter().any(|(key, _)| key == k))
        .collect()
}

/// Every key of `keys` with the value set in `kept`, else its default, in the order of `keys`.
pub(crate) fn with_defaults(kept: Option<&Pairs>, keys: &[(&str, &str)]) -> Pairs {
    keys.iter()
        .map(|&(k, default)| {
            let v = kept
                .and_then(|h| h.iter().find(|(kk, _)| kk == k))
                .map_or(default, |(_, v)| v.as_str());
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

/// `MPI_INFO_NULL`.
const INFO_NULL: Handle = 0x1c00_0000;

/// The hints of `info` (none for `MPI_INFO_NULL`); `MPI_ERR_INFO` for a handle that is not an
/// info object.
pub(crate) fn hints_of(info: Handle) -> Result<Pairs, MpiError> {
    if info == INFO_NULL {
        return Ok(Pairs::new());
    }
    with_info(info, |v| v.clone())
}

/// `MPIX_GPU_SUPPORT_CUDA`, `MPIX_GPU_SUPPORT_ZE`, `MPIX_GPU_SUPPORT_HIP`: the GPU kinds
/// `MPIX_GPU_query_support` knows.
const GPU_KINDS: [c_int; 3] = [0, 1, 2];

mpi_fn! {
    /// `MPIX_GPU_query_support`: 0 (no GPU buffers are supported) for each kind MPICH names
    /// (`MPIX_GPU_SUPPORT_CUDA`, `_ZE`, `_HIP`); another kind is `MPI_ERR_ARG`.
    MPIX_GPU_query_support / PMPIX_GPU_query_support(gpu_type: c_int, is_supported: *mut c_int) on abi::COMM_WORLD => {
        if !GPU_KINDS.contains(&gpu_type) {
            return Err(MpiError::new(err::ARG, format!("{gpu_type} is not a GPU kind of mpi.h")));
        }
        // SAFETY: the caller's flag.
        unsafe { put(is_supported, 0, "is_supported") }
    }
}

mpi_raw! {
    /// `MPIX_Query_cuda_support`: 0, CUDA buffers are not supported (as MPICH built without
    /// GPU support).
    MPIX_Query_cuda_support / PMPIX_Query_cuda_support() -> c_int => { 0 }
}

mpi_raw! {
    /// `MPIX_Query_hip_support`: 0, HIP buffers are not supported.
    MPIX_Query_hip_support / PMPIX_Query_hip_support() -> c_int => { 0 }
}

mpi_raw! {
    /// `MPIX_Query_ze_support`: 0, Level Zero buffers are not supported.
    MPIX_Query_ze_support / PMPIX_Query_ze_support() -> c_int => { 0 }
}
