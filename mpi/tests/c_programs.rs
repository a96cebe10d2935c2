//! Runs the C programs of `mpi/tests/c`, compiled by the system's `mpicc` (MPICH's wrapper,
//! linking Debian's `libmpich.so.12`), on viaduct: the library path points at
//! `target/<profile>/mpich-abi` (built by `scripts/mpi-lib`), and the programs run under
//! `viaduct launch -n 2` and `-n 4`, under MPICH's `mpiexec -n 2` (hydra, PMI-1), and alone
//! (a single rank). Their result lines are compared with the same binaries run on MPICH.
//!
//! The Fortran programs of `mpi/tests/fortran` (compiled by `mpif90`, linking MPICH's Fortran
//! library `libmpichfort.so.12`, which calls into the swapped `libmpich.so.12`) and the C++
//! programs of `mpi/tests/cxx` (compiled by `mpicxx`, using MPICH's C++ binding
//! `libmpichcxx.so.12`) run the same way, and so does the parallel HDF5 program of
//! `mpi/tests/hdf5` (compiled by `h5pcc.mpich`, linking Debian's `libhdf5-mpich`).
//!
//! Skipped, with a message saying so, where `mpicc` (or, for the Fortran programs, `mpif90`) is
//! not installed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Most time one job may take (generous: a loaded 2-core machine).
const JOB_LIMIT: Duration = Duration::from_secs(120);

/// The limit of a job of `lcount`, which moves 2^31-byte messages four times through the
/// unoptimised (debug) library (about 20 s each here, under 3 s each in a release build).
const LARGE_JOB_LIMIT: Duration = Duration::from_secs(420);

struct Setup {
    root: PathBuf,
    lib_dir: PathBuf,
    launcher: PathBuf,
    bins: PathBuf,
    mpiexec: bool,
    /// Whether the Fortran programs were compiled (`mpif90` is installed).
    fortran: bool,
    /// Whether the C++ programs were compiled (`mpicxx` is installed).
    cxx: bool,
    /// Whether the HDF5 programs were compiled (`h5pcc.mpich` is installed).
    hdf5: bool,
}

/// The parallel HDF5 programs of `mpi/tests/hdf5` (`NAME.c`).
const HDF5_PROGRAMS: &[&str] = &["ph5"];

/// The C++ programs of `mpi/tests/cxx` (`NAME.cxx`).
const CXX_PROGRAMS: &[&str] = &["cxxbasic"];

/// The Fortran programs of `mpi/tests/fortran` (`NAME.f90`).
const FORTRAN_PROGRAMS: &[&str] = &["fbasic", "fattr"];

const PROGRAMS: &[&str] = &[
    "env",
    "packbottom",
    "winquery",
    "p2p",
    "coll",
    "errors",
    "greq",
    "threads",
    "more",
    "greqx",
    "fileio",
    "types",
    "vcoll",
    "misc",
    "fatal",
    "attr",
    "topo",
    "groups",
    "noncomm",
    "ivcoll",
    "small",
    "greqh",
    "pcoll",
    "errclass",
    "nbrw",
    "fileview",
    "inter",
    "rma",
    "pscw",
    "rmalock",
    "rmashared",
    "rmadynamic",
    "mprobe",
    "types2",
    "largecount",
    "mpit",
    "filesplit",
    "fileshared",
    "winattr",
    "cforms",
    "rmaflush",
    "rmathreads",
    "sessions",
    "part",
    "dynamic",
    "fileerr",
    "fstatus",
    "cforms2",
    "datarep",
    "partmt",
    "partorder",
    "fileedge",
    "fileatomic",
    "sessre",
    "errdel",
    "errextra",
    "interfg",
    "ulfm",
    "conform",
    "holeyred",
    "splittype",
    "rmapoll",
    "lcount",
    "partlate",
    "rmamany",
];

/// MPICH's tool `tool` by its own name (`mpicc.mpich`, ...) where Debian installed it so:
/// once Open MPI is installed as well, the plain name may lead to Open MPI's.
fn mpich(tool: &str) -> String {
    let own = format!("{tool}.mpich");
    if have(&own) { own } else { tool.to_string() }
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn checked(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn setup() -> Option<&'static Setup> {
    static SETUP: OnceLock<Option<Setup>> = OnceLock::new();
    SETUP
        .get_or_init(|| {
            if !have(&mpich("mpicc")) {
                eprintln!(
                    "SKIPPED: mpicc (MPICH, package libmpich-dev) is not installed; the C \
                     programs of mpi/tests/c were not run"
                );
                return None;
            }
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            let root = root.canonicalize().expect("workspace root");
            let cargo = env!("CARGO");
            let lib = checked(
                Command::new(root.join("scripts/mpi-lib")).current_dir(&root),
                "scripts/mpi-lib",
            );
            let lib_dir = PathBuf::from(lib.trim());
            checked(
                Command::new(cargo)
                    .args(["build", "-p", "viaduct", "--bin", "viaduct"])
                    .current_dir(&root),
                "cargo build --bin viaduct",
            );
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"));
            let target = if target.is_absolute() {
                target
            } else {
                root.join(target)
            };
            let launcher = target.join("debug/viaduct");
            let bins = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mpi-c");
            std::fs::create_dir_all(&bins).expect("folder for the C programs");
            for p in PROGRAMS {
                let src = root.join(format!("mpi/tests/c/{p}.c"));
                checked(
                    Command::new(mpich("mpicc"))
                        .arg("-Wno-stringop-overflow")
                        .arg(&src)
                        .arg("-o")
                        .arg(bins.join(p))
                        .arg("-lpthread"),
                    &format!("mpicc {p}.c"),
                );
            }
            let fortran = have(&mpich("mpif90"));
            if fortran {
                for p in FORTRAN_PROGRAMS {
                    let src = root.join(format!("mpi/tests/fortran/{p}.f90"));
                    checked(
                        Command::new(mpich("mpif90"))
                            .arg("-w")
                            .arg(&src)
                            .arg("-o")
                            .arg(bins.join(p))
                            .current_dir(&bins),
                        &format!("mpif90 {p}.f90"),
                    );
                }
            } else {
                eprintln!(
                    "SKIPPED: mpif90 (MPICH, package libmpich-dev with gfortran) is not \
                     installed; the Fortran programs of mpi/tests/fortran were not run"
                );
            }
            let cxx = have(&mpich("mpicxx"));
            if cxx {
                for p in CXX_PROGRAMS {
                    let src = root.join(format!("mpi/tests/cxx/{p}.cxx"));
                    checked(
                        Command::new(mpich("mpicxx"))
                            .arg(&src)
                            .arg("-o")
                            .arg(bins.join(p)),
                        &format!("mpicxx {p}.cxx"),
                    );
                }
            } else {
                eprintln!(
                    "SKIPPED: mpicxx (MPICH, package libmpich-dev with g++) is not installed; the \
                     C++ programs of mpi/tests/cxx were not run"
                );
            }
            let hdf5 = have("h5pcc.mpich");
            if hdf5 {
                for p in HDF5_PROGRAMS {
                    let src = root.join(format!("mpi/tests/hdf5/{p}.c"));
                    checked(
                        // (h5pcc leaves its object file in the folder it runs in.)
                        Command::new("h5pcc.mpich")
                            .arg(&src)
                            .arg("-o")
                            .arg(bins.join(p))
                            .current_dir(&bins),
                        &format!("h5pcc.mpich {p}.c"),
                    );
                }
            } else {
                eprintln!(
                    "SKIPPED: h5pcc.mpich (package libhdf5-mpich-dev) is not installed; the \
                     HDF5 programs of mpi/tests/hdf5 were not run"
                );
            }
            let mpiexec = have(&mpich("mpiexec"));
            if !mpiexec {
                eprintln!("note: mpiexec is not installed; runs under mpiexec are left out");
            }
            Some(Setup {
                root,
                lib_dir,
                launcher,
                bins,
                mpiexec,
                fortran,
                cxx,
                hdf5,
            })
        })
        .as_ref()
}

/// What a finished job gave.
struct Job {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` in its own process group; kills the group after [`JOB_LIMIT`] (after
/// [`LARGE_JOB_LIMIT`] for `lcount`).
fn run(mut cmd: Command) -> Job {
    use std::os::unix::process::CommandExt;
    let shown = format!("{cmd:?}");
    let limit = if shown.contains("/lcount\"") {
        LARGE_JOB_LIMIT
    } else {
        JOB_LIMIT
    };
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the job") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!("{shown} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Job {
        code: status.code(),
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
}

#[derive(Clone, Copy, Debug)]
enum Launch {
    /// `viaduct launch -n N`.
    Viaduct(u32),
    /// MPICH's `mpiexec -n N`.
    Mpiexec(u32),
    /// No launcher: a single rank.
    Alone,
}

/// Runs program `p`, on viaduct (`swap`: the library path points at viaduct's folder) or on
/// MPICH.
fn job(s: &Setup, p: &str, how: Launch, swap: bool, env: &[(&str, &str)]) -> Job {
    let bin = s.bins.join(p);
    let mut cmd = match how {
        Launch::Viaduct(n) => {
            let mut c = Command::new(&s.launcher);
            c.args(["launch", "-n", &n.to_string(), "--"]).arg(&bin);
            c
        }
        Launch::Mpiexec(n) => {
            let mut c = Command::new(mpich("mpiexec"));
            c.args(["-n", &n.to_string()]).arg(&bin);
            c
        }
        Launch::Alone => Command::new(&bin),
    };
    cmd.current_dir(&s.root);
    if swap {
        cmd.env("LD_LIBRARY_PATH", &s.lib_dir);
    } else {
        cmd.env_remove("LD_LIBRARY_PATH");
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(cmd)
}

/// Where a result (`rank N: `) starts in `l`.
fn result_starts(l: &str) -> Vec<usize> {
    l.match_indices("rank ")
        .map(|(i, _)| i)
        .filter(|&i| {
            let rest = &l[i + 5..];
            let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
            digits > 0 && rest[digits..].starts_with(": ")
        })
        .collect()
}

/// The result lines (`rank N: ...`), without the launcher's `[N] ` prefixes, sorted. A line
/// holding two results (a launcher that forwards the output of two ranks without keeping their
/// lines apart) counts as two.
fn results(out: &str) -> Vec<String> {
    let mut v = Vec::new();
    for l in out.lines() {
        let l = l.trim_end();
        let l = match l.strip_prefix('[').and_then(|r| r.split_once("] ")) {
            Some((n, rest)) if n.chars().all(|c| c.is_ascii_digit()) => rest,
            _ => l,
        };
        let starts = result_starts(l);
        for (k, &i) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or(l.len());
            v.push(l[i..end].trim_end().to_string());
        }
    }
    v.sort();
    v
}

fn assert_ok(j: &Job, what: &str, ranks: usize) -> Vec<String> {
    assert_eq!(
        j.code,
        Some(0),
        "{what} failed:\n--- stdout\n{}\n--- stderr\n{}",
        j.stdout,
        j.stderr
    );
    let r = results(&j.stdout);
    let per_rank: std::collections::BTreeSet<&str> =
        r.iter().filter_map(|l| l.split(':').next()).collect();
    assert_eq!(
        per_rank.len(),
        ranks,
        "{what}: result lines of {ranks} ranks expected:\n{}",
        j.stdout
    );
    r
}

/// Runs `p` on viaduct under `viaduct launch -n 2` and `-n 4` and `mpiexec -n 2`, and on MPICH
/// under `mpiexec -n 2`; the result lines on viaduct and MPICH must be the same.
fn program(p: &str) {
    let Some(s) = setup() else { return };
    let v2 = assert_ok(
        &job(s, p, Launch::Viaduct(2), true, &[]),
        &format!("{p} on viaduct, viaduct launch -n 2"),
        2,
    );
    assert_ok(
        &job(s, p, Launch::Viaduct(4), true, &[]),
        &format!("{p} on viaduct, viaduct launch -n 4"),
        4,
    );
    if !s.mpiexec {
        return;
    }
    let m2 = assert_ok(
        &job(s, p, Launch::Mpiexec(2), true, &[]),
        &format!("{p} on viaduct, mpiexec -n 2"),
        2,
    );
    assert_eq!(
        v2, m2,
        "{p}: viaduct under viaduct launch and under mpiexec differ"
    );
    let mpich = assert_ok(
        &job(s, p, Launch::Mpiexec(2), false, &[]),
        &format!("{p} on MPICH, mpiexec -n 2"),
        2,
    );
    assert_eq!(m2, mpich, "{p}: viaduct and MPICH give different results");
}

/// Runs `p` on viaduct under `viaduct launch -n N` for each `N` of `sizes`, and where mpiexec
/// is installed under `mpiexec -n N` on viaduct and on MPICH; the result lines must be the same.
fn program_at(p: &str, sizes: &[u32]) {
    let Some(s) = setup() else { return };
    for &n in sizes {
        let v = assert_ok(
            &job(s, p, Launch::Viaduct(n), true, &[]),
            &format!("{p} on viaduct, viaduct launch -n {n}"),
            n as usize,
        );
        if !s.mpiexec {
            continue;
        }
        let mpich = assert_ok(
            &job(s, p, Launch::Mpiexec(n), false, &[]),
            &format!("{p} on MPICH, mpiexec -n {n}"),
            n as usize,
        );
        assert_eq!(
            v, mpich,
            "{p}: viaduct and MPICH give different results at {n} ranks"
        );
    }
}

/// Runs `p` at each size of `sizes` on viaduct under `viaduct launch -n N` and, where mpiexec
/// is installed, on viaduct and on MPICH under `mpiexec -n N`; the result lines of the three
/// must be the same.
fn program_at_both(p: &str, sizes: &[u32]) {
    let Some(s) = setup() else { return };
    for &n in sizes {
        let v = assert_ok(
            &job(s, p, Launch::Viaduct(n), true, &[]),
            &format!("{p} on viaduct, viaduct launch -n {n}"),
            n as usize,
        );
        if !s.mpiexec {
            continue;
        }
        let m = assert_ok(
            &job(s, p, Launch::Mpiexec(n), true, &[]),
            &format!("{p} on viaduct, mpiexec -n {n}"),
            n as usize,
        );
        assert_eq!(
            v, m,
            "{p}: viaduct under viaduct launch and under mpiexec differ at {n} ranks"
        );
        let mpich = assert_ok(
            &job(s, p, Launch::Mpiexec(n), false, &[]),
            &format!("{p} on MPICH, mpiexec -n {n}"),
            n as usize,
        );
        assert_eq!(
            v, mpich,
            "{p}: viaduct and MPICH give different results at {n} ranks"
        );
    }
}

/// Runs Fortran program `p` as [`program`] runs a C one, where `mpif90` compiled it.
fn fortran_program(p: &str) {
    let Some(s) = setup() else { return };
    if !s.fortran {
        eprintln!("SKIPPED: {p}: mpif90 is not installed");
        return;
    }
    program(p);
}

/// Partitioned requests of one (peer, tag, communicator) matched by init order, whatever
/// order they are started in.
#[test]
fn partorder_program() {
    program("partorder");
}

#[test]
fn holeyred_program() {
    program_at_both("holeyred", &[1, 2, 3, 4]);
}

/// Parallel HDF5 over the MPI face's MPI-IO: collective contiguous and linked-chunk writes,
/// independent writes, collective metadata, then every element read back on every rank.
/// HDF5's chunk view is a filetype whose data spans more than its extent, used for one tile.
#[test]
fn hdf5_parallel_program() {
    let Some(s) = setup() else { return };
    if !s.hdf5 {
        eprintln!("SKIPPED: ph5: h5pcc.mpich (libhdf5-mpich-dev) is not installed");
        return;
    }
    program_at_both("ph5", &[1, 2, 4]);
}

#[test]
fn cxx_basic_program() {
    let Some(s) = setup() else { return };
    if !s.cxx {
        eprintln!("SKIPPED: cxxbasic: mpicxx is not installed");
        return;
    }
    program("cxxbasic");
}

#[test]
fn fortran_basic_program() {
    fortran_program("fbasic");
}

#[test]
fn fortran_attr_program() {
    fortran_program("fattr");
}

#[test]
fn env_program() {
    program("env");
}

#[test]
fn p2p_program() {
    program("p2p");
}

#[test]
fn coll_program() {
    program("coll");
}

#[test]
fn errors_program() {
    program("errors");
}

#[test]
fn greq_program() {
    program("greq");
}

#[test]
fn threads_program() {
    program("threads");
}

#[test]
fn more_program() {
    program("more");
}

#[test]
fn fileio_program() {
    program("fileio");
}

#[test]
fn fileview_program() {
    program("fileview");
}

/// Split-collective file I/O: begin/end pairs, one outstanding per file handle.
#[test]
fn filesplit_program() {
    program("filesplit");
}

/// The shared file pointer: concurrent `write_shared`/`read_shared` from every rank, ordered
/// accesses, seeks.
#[test]
fn fileshared_program() {
    program_at_both("fileshared", &[2, 3, 4]);
}

/// Atomic mode: a writer and concurrent readers of a noncontiguous view (blocking and
/// nonblocking) and of contiguous data; every read sees one write whole.
#[test]
fn fileatomic_program() {
    program_at_both("fileatomic", &[2, 4]);
}

/// Window keyvals and attributes, with their delete callbacks.
#[test]
fn winattr_program() {
    program("winattr");
}

/// `MPI_Op_create_c` and the persistent `v`/`w` collectives' `_c` forms (the neighbourhood
/// ones at 3 ranks and more).
#[test]
fn cforms_program() {
    program_at_both("cforms", &[2, 3, 4]);
}

/// `MPI_Win_flush_local`/`_all` return while the target process is stopped. Not compared
/// with MPICH: MPICH 4.0.2's `MPI_Win_flush_local` waits for the target (the program's alarm
/// fails the job there).
#[test]
fn rmaflush_program() {
    let Some(s) = setup() else { return };
    let want = |n: usize| -> Vec<String> {
        let mut v: Vec<String> = (0..n)
            .flat_map(|r| {
                [
                    format!("rank {r}: flush_local completes a get with its data"),
                    format!(
                        "rank {r}: flush_local completes puts and accumulates with the target stopped"
                    ),
                ]
            })
            .collect();
        v.sort();
        v
    };
    for n in [2u32, 3, 4] {
        let got = assert_ok(
            &job(s, "rmaflush", Launch::Viaduct(n), true, &[]),
            &format!("rmaflush, viaduct launch -n {n}"),
            n as usize,
        );
        assert_eq!(got, want(n as usize));
    }
    if s.mpiexec {
        let got = assert_ok(
            &job(s, "rmaflush", Launch::Mpiexec(2), true, &[]),
            "rmaflush on viaduct, mpiexec -n 2",
            2,
        );
        assert_eq!(got, want(2));
    }
}

/// MPI-4 sessions without `MPI_Init`, and beside it (`SESSIONS_WITH_INIT=1`), at 2 and 3 ranks
/// under both launchers and alone, compared with MPICH.
#[test]
fn sessions_program() {
    program_at_both("sessions", &[2, 3]);
    let Some(s) = setup() else { return };
    let alone = assert_ok(
        &job(s, "sessions", Launch::Alone, true, &[]),
        "sessions alone",
        1,
    );
    assert_eq!(alone.len(), 3, "{alone:?}");
    let env = [("SESSIONS_WITH_INIT", "1")];
    for n in [2u32, 3] {
        let v = assert_ok(
            &job(s, "sessions", Launch::Viaduct(n), true, &env),
            &format!("sessions with MPI_Init, viaduct launch -n {n}"),
            n as usize,
        );
        if s.mpiexec {
            let m = assert_ok(
                &job(s, "sessions", Launch::Mpiexec(n), false, &env),
                &format!("sessions with MPI_Init on MPICH, mpiexec -n {n}"),
                n as usize,
            );
            assert_eq!(
                v, m,
                "sessions with MPI_Init: viaduct and MPICH differ at {n} ranks"
            );
        }
    }
}

#[test]
fn conform_program() {
    program("conform");
}

/// `MPI_Pack`/`MPI_Unpack` with `MPI_BOTTOM`, on viaduct only (MPICH 4.0.2 refuses it).
#[test]
fn packbottom_program() {
    let Some(s) = setup() else { return };
    let got = assert_ok(
        &job(s, "packbottom", Launch::Viaduct(1), true, &[]),
        "packbottom on viaduct, viaduct launch -n 1",
        1,
    );
    assert_eq!(got, ["rank 0: MPI_Pack and MPI_Unpack with MPI_BOTTOM"]);
}

/// `MPI_Win_shared_query` on windows of every flavor (MPI 4.1), on viaduct only (MPICH 4.0.2
/// refuses it on windows not made by `MPI_Win_allocate_shared`): 1, 2 and 3 ranks.
#[test]
fn winquery_program() {
    let Some(s) = setup() else { return };
    for n in [1u32, 2, 3] {
        let what = format!("winquery on viaduct, viaduct launch -n {n}");
        let got = assert_ok(
            &job(s, "winquery", Launch::Viaduct(n), true, &[]),
            &what,
            n as usize,
        );
        for r in 0..n {
            for w in [
                "MPI_Win_create",
                "MPI_Win_allocate",
                "MPI_Win_create_dynamic",
            ] {
                let line = format!("rank {r}: {w}: own memory only");
                assert!(got.contains(&line), "{what}: no line {line:?} in {got:?}");
            }
        }
    }
}

/// Runs `p` on viaduct at `n` ranks under `viaduct launch` and, where installed, `mpiexec`;
/// gives each run's description and result lines (none without the setup).
fn on_viaduct_both(p: &str, n: u32) -> Vec<(String, Vec<String>)> {
    let Some(s) = setup() else { return Vec::new() };
    let mut launches = vec![Launch::Viaduct(n)];
    if s.mpiexec {
        launches.push(Launch::Mpiexec(n));
    }
    launches
        .into_iter()
        .map(|how| {
            let what = format!("{p} on viaduct, {how:?}");
            let got = assert_ok(&job(s, p, how, true, &[]), &what, n as usize);
            (what, got)
        })
        .collect()
}

/// File I/O edge cases on viaduct only, each value checked in the program (MPICH 4.0.2 counts
/// zeros past the end of the file in collective and strided reads, and fails on a filetype
/// without data): 3 ranks under both launchers.
#[test]
fn fileedge_program() {
    for (what, got) in on_viaduct_both("fileedge", 3) {
        let want_each = [
            "read_at past the end: count 6, bytes 5 10 99 (untouched 99)",
            "read_at_all past the end: count 10, bytes 1 10 (untouched 99 99)",
            "iread_at past the end: count 2, bytes 9 10 (untouched 99)",
            "strided read past the end: count 6, bytes 1 2 5 6 9 10 (untouched 99 99)",
            "bad views refused",
            "overlapping view read-only: 4030201 feffffff 5030201 feffffff",
            "freed handler called 2 times, class MPI_ERR_ACCESS",
        ];
        for r in 0..3 {
            for w in want_each {
                let line = format!("rank {r}: {w}");
                assert!(got.contains(&line), "{what}: no line {line:?} in {got:?}");
            }
            let n = if r == 2 { 0 } else { 2 };
            let line =
                format!("rank {r}: write_all through a view of {n} ints: count {n}, position {n}");
            assert!(got.contains(&line), "{what}: no line {line:?} in {got:?}");
            let line = format!(
                "rank {r}: external32 view: back 102030{} -2, file bytes 0102030{} fffffffe",
                4 + r,
                4 + r
            );
            assert!(got.contains(&line), "{what}: no line {line:?} in {got:?}");
        }
        assert!(
            got.contains(&"rank 2: a write of data through a view without data fails".to_string())
        );
    }
}

/// Sessions started again and the world model after them, on viaduct only (MPICH 4.0.2
/// fails a second `MPI_Session_init`): 2 ranks under both launchers.
#[test]
fn sessre_program() {
    for (what, got) in on_viaduct_both("sessre", 2) {
        let mut want = Vec::new();
        for r in 0..2 {
            for round in 0..3 {
                want.push(format!(
                    "rank {r}: session round {round}: sum {}",
                    1 + 2 * round
                ));
            }
            want.push(format!("rank {r}: world model after the sessions: 2 ranks"));
        }
        let mut got = got.clone();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{what}");
    }
}

/// Error behaviour on viaduct only, where MPICH 4.0.2 differs (an invalid `thread_level` of
/// `MPI_Session_init`, a session handler clearing the code, `MPI_COMM_NULL` left by a creation
/// with a wrong argument): 2 ranks under both launchers.
#[test]
fn errextra_program() {
    for (what, got) in on_viaduct_both("errextra", 2) {
        let mut want = Vec::new();
        for r in 0..2 {
            want.push(format!("rank {r}: failed creations leave MPI_COMM_NULL"));
            want.push(format!(
                "rank {r}: bad thread_level refused; session handler cleared the code"
            ));
        }
        let mut got = got.clone();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn splittype_program() {
    program("splittype");
}

#[test]
fn types_program() {
    program("types");
}

#[test]
fn vcoll_program() {
    program("vcoll");
}

#[test]
fn misc_program() {
    program("misc");
}

#[test]
fn attr_program() {
    program("attr");
}

#[test]
fn topo_program() {
    program("topo");
}

#[test]
fn groups_program() {
    program("groups");
}

#[test]
fn noncomm_program() {
    program("noncomm");
}

#[test]
fn ivcoll_program() {
    program("ivcoll");
}

#[test]
fn dynamic_program() {
    program("dynamic");
}

#[test]
fn fileerr_program() {
    program("fileerr");
}

#[test]
fn fstatus_program() {
    program("fstatus");
}

#[test]
fn cforms2_program() {
    program("cforms2");
}

#[test]
fn datarep_program() {
    program("datarep");
}

#[test]
fn partmt_program() {
    program("partmt");
}

#[test]
fn part_program() {
    program("part");
}

#[test]
fn pcoll_program() {
    program("pcoll");
}

#[test]
fn errclass_program() {
    program("errclass");
}

#[test]
fn errdel_program() {
    program("errdel");
}

/// ULFM on viaduct (MPICH 4.0.2 is built without it): at 3 and 4 ranks the last rank kills
/// itself; under `VIADUCT_LAUNCH_KEEP_GOING=1` the survivors see `MPIX_ERR_PROC_FAILED`, revoke,
/// see `MPIX_ERR_REVOKED`, shrink, sum over the shrunk communicator, agree, acknowledge and
/// finalize.
#[test]
fn ulfm_program() {
    let Some(s) = setup() else { return };
    for n in [3u32, 4] {
        let start = Instant::now();
        let j = job(
            s,
            "ulfm",
            Launch::Viaduct(n),
            true,
            &[
                ("VIADUCT_LAUNCH_KEEP_GOING", "1"),
                ("VIADUCT_PEER_TIMEOUT", "2"),
            ],
        );
        let victim = n - 1;
        assert!(
            j.stderr.contains(&format!(
                "rank {victim} was killed by signal 9 (SIGKILL); the other ranks go on"
            )),
            "the launcher kept the survivors:\n{}",
            j.stderr
        );
        assert!(
            !j.stderr.contains("CHECK FAILED"),
            "at {n} ranks:\n{}\n{}",
            j.stdout,
            j.stderr
        );
        // The survivors finalize (the launcher's barriers complete without the dead rank);
        // the job's status is the dead rank's.
        assert_eq!(j.code, Some(128 + 9), "at {n} ranks:\n{}", j.stderr);
        let r = results(&j.stdout);
        let want_sum = (n - 1) * (n - 2) / 2;
        let mut want = vec![
            "rank 0: receive from the dead rank: MPIX_ERR_PROC_FAILED".to_string(),
            "rank 0: send on the revoked communicator: MPIX_ERR_REVOKED".to_string(),
        ];
        for k in 0..victim {
            if k > 0 {
                want.push(format!(
                    "rank {k}: a call after the revoke: MPIX_ERR_REVOKED"
                ));
            }
            want.push(format!("rank {k}: shrunk: size {victim}, rank {k}, sum of world ranks {want_sum} (want {want_sum})"));
            want.push(format!(
                "rank {k}: world shrunk to {victim}, shrunk again to {victim}"
            ));
            want.push(format!(
                "rank {k}: agree on the shrunk communicator: class 0, flag 6"
            ));
            want.push(format!(
                "rank {k}: agree before the acknowledgement: MPIX_ERR_PROC_FAILED, flag 1"
            ));
            want.push(format!(
                "rank {k}: acknowledged: 1 process(es), rank {victim}"
            ));
            want.push(format!(
                "rank {k}: agree after the acknowledgement: class 0, flag 1"
            ));
            want.push(format!("rank {k}: wrong use: 12 12 5"));
        }
        want.sort();
        assert_eq!(r, want, "at {n} ranks:\n{}", j.stderr);
        // Generous: the failure is seen within the peer timeout (2 s), not the job limit.
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "at {n} ranks: {:?}",
            start.elapsed()
        );
    }
}

/// `MPI_Intercomm_create_from_groups` at 2, 3 and 4 ranks (groups of unequal sizes at 3).
#[test]
fn interfg_program() {
    program_at_both("interfg", &[2, 3, 4]);
}

#[test]
fn nbrw_program() {
    program("nbrw");
}

/// Generalized request callbacks and threads, small allgather and allgatherv: the same results
/// as MPICH at 2 ranks, and every check passing at 1 and 3 ranks (a ring that is not a power
/// of two, and a single rank).
#[test]
fn small_program() {
    program("small");
    let Some(s) = setup() else { return };
    for n in [1u32, 3] {
        assert_ok(
            &job(s, "small", Launch::Viaduct(n), true, &[]),
            &format!("small on viaduct, viaduct launch -n {n}"),
            n as usize,
        );
    }
}

/// MPICH's generalized request extensions. Not compared with MPICH: there the wait function
/// gets one request at a time, here every request of the class in the wait (the batch).
#[test]
fn greqx_program() {
    let Some(s) = setup() else { return };
    let want = |n: usize| -> Vec<String> {
        let mut v: Vec<String> = (0..n)
            .flat_map(|r| {
                [
                    format!("rank {r}: poll function ok"),
                    format!("rank {r}: wait function got the batch of 3"),
                    format!("rank {r}: failing poll cancels"),
                ]
            })
            .collect();
        v.sort();
        v
    };
    let got = assert_ok(
        &job(s, "greqx", Launch::Viaduct(2), true, &[]),
        "greqx, viaduct launch -n 2",
        2,
    );
    assert_eq!(got, want(2));
    if s.mpiexec {
        let got = assert_ok(
            &job(s, "greqx", Launch::Mpiexec(2), true, &[]),
            "greqx on viaduct, mpiexec -n 2",
            2,
        );
        assert_eq!(got, want(2));
    }
}

/// Generalized request handles: waited, freed, stale (their slot reused) and never issued
/// handles give `MPI_ERR_REQUEST`, free runs at the right time, and requests completed by
/// another thread while this one waits, tests or frees them are queried and freed once; at
/// `MPI_THREAD_MULTIPLE` and (but the second thread) at `MPI_THREAD_SINGLE`. Not compared with
/// MPICH, where a freed handle is undefined behaviour.
#[test]
fn greq_handles_program() {
    let Some(s) = setup() else { return };
    let serial = [
        "rank 0: a stale handle leaves newer requests alone",
        "rank 0: a waited handle gives MPI_ERR_REQUEST",
        "rank 0: free before and after completion",
        "rank 0: handles never issued give MPI_ERR_REQUEST",
        "rank 0: reused slots",
    ];
    let got = assert_ok(
        &job(s, "greqh", Launch::Viaduct(1), true, &[]),
        "greqh, viaduct launch -n 1",
        1,
    );
    let mut want: Vec<&str> = serial.to_vec();
    want.push("rank 0: completed by another thread: each freed once");
    want.sort();
    assert_eq!(got, want);
    // MPI_Init (MPI_THREAD_SINGLE), without the second thread.
    let got = assert_ok(
        &job(
            s,
            "greqh",
            Launch::Viaduct(1),
            true,
            &[("GREQH_SINGLE", "1")],
        ),
        "greqh at MPI_THREAD_SINGLE, viaduct launch -n 1",
        1,
    );
    assert_eq!(got, serial);
}

/// The swapped library is viaduct's: the dynamic linker resolves `libmpich.so.12` to the
/// mpich-abi folder, `MPI_Init` says so with `VIADUCT_MPI_VERBOSE=1`, and
/// `MPI_Get_library_version` names viaduct.
#[test]
fn swapped_library_is_viaduct() {
    let Some(s) = setup() else { return };
    let ldd = Command::new("ldd")
        .arg(s.bins.join("env"))
        .env("LD_LIBRARY_PATH", &s.lib_dir)
        .output()
        .expect("ldd");
    let ldd = String::from_utf8_lossy(&ldd.stdout);
    let line = ldd
        .lines()
        .find(|l| l.contains("libmpich.so.12"))
        .unwrap_or_else(|| panic!("ldd names no libmpich.so.12:\n{ldd}"));
    assert!(
        line.contains(&*s.lib_dir.to_string_lossy()),
        "libmpich.so.12 does not resolve to {}: {line}",
        s.lib_dir.display()
    );
    let env = [("VIADUCT_MPI_VERBOSE", "1"), ("TEST_SHOW_LIBRARY", "1")];
    let j = job(s, "env", Launch::Viaduct(2), true, &env);
    assert_ok(&j, "env with VIADUCT_MPI_VERBOSE=1", 2);
    assert_eq!(
        j.stderr.matches("viaduct MPI: rank ").count(),
        2,
        "each rank's MPI_Init says it is viaduct:\n{}",
        j.stderr
    );
    assert!(j.stderr.contains("library: viaduct MPI"), "{}", j.stderr);
    let mpich = job(s, "env", Launch::Alone, false, &env);
    assert_ok(&mpich, "env on MPICH", 1);
    assert!(
        !mpich.stderr.contains("viaduct"),
        "without the swap MPICH runs:\n{}",
        mpich.stderr
    );
}

/// Without a launcher the program is a single rank; every thread level is provided as asked.
#[test]
fn alone_every_thread_level() {
    let Some(s) = setup() else { return };
    for level in ["0", "1", "2", "3"] {
        let j = job(
            s,
            "env",
            Launch::Alone,
            true,
            &[("TEST_THREAD_LEVEL", level)],
        );
        let r = assert_ok(&j, &format!("env alone, thread level {level}"), 1);
        assert_eq!(
            r,
            [format!(
                "rank 0: env size 1 version 4.0 thread level {level}"
            )]
        );
    }
}

/// `MPI_ERRORS_ARE_FATAL` (the default): the job ends with a message naming the call and the
/// cause, under both launchers.
#[test]
fn fatal_error_names_call_and_cause() {
    let Some(s) = setup() else { return };
    let mut hows = vec![Launch::Viaduct(2)];
    if s.mpiexec {
        hows.push(Launch::Mpiexec(2));
    }
    for how in hows {
        let j = job(s, "fatal", how, true, &[]);
        assert_ne!(j.code, Some(0), "the job must fail:\n{}", j.stderr);
        assert!(
            j.stderr
                .contains("fatal error in MPI_Send: Invalid rank (class 6): rank 3 is not in the communicator of 2 ranks"),
            "message names the call and the cause:\n{}",
            j.stderr
        );
        assert!(!j.stdout.contains("NOT REACHED"), "{}", j.stdout);
    }
}

/// `MPI_Abort` ends the process with a failing status even for a non-zero error code whose
/// low 8 bits are 0 (an exit status keeps only those); code 0 exits with 0, as in MPICH.
#[test]
fn abort_code_never_reads_as_success() {
    let Some(s) = setup() else { return };
    for (code, want) in [("3", 3), ("256", 1), ("0", 0)] {
        let j = job(s, "fatal", Launch::Alone, true, &[("TEST_ABORT", code)]);
        assert_eq!(j.code, Some(want), "MPI_Abort with {code}:\n{}", j.stderr);
        assert!(
            j.stderr.contains(&format!(
                "MPI_Abort(comm 0x44000000, errorcode {code}) called"
            )),
            "{}",
            j.stderr
        );
    }
}

/// `MPI_Abort` on one rank goes through the PMI abort command: `viaduct launch` reports the
/// abort with its code and ends the rank waiting for a message; under `mpiexec` the job ends
/// with the code too.
#[test]
fn abort_reaches_the_launcher() {
    let Some(s) = setup() else { return };
    let env = [("TEST_ABORT", "5"), ("TEST_ABORT_RANK", "1")];
    let j = job(s, "fatal", Launch::Viaduct(2), true, &env);
    assert_eq!(j.code, Some(5), "{}", j.stderr);
    assert!(
        j.stderr.contains("rank 1 aborted the job (exit code 5)"),
        "the launcher reports the PMI abort:\n{}",
        j.stderr
    );
    assert!(
        j.stderr
            .contains("MPI_Abort(comm 0x44000000, errorcode 5) called"),
        "{}",
        j.stderr
    );
    if s.mpiexec {
        let j = job(s, "fatal", Launch::Mpiexec(2), true, &env);
        assert_eq!(j.code, Some(5), "{}", j.stderr);
    }
    // Code 0 (how Fortran coarray runtimes end a `STOP`): the job still ends (rank 0 would
    // wait for a message forever otherwise) and exits with 0, under either launcher.
    let env = [("TEST_ABORT", "0"), ("TEST_ABORT_RANK", "1")];
    let j = job(s, "fatal", Launch::Viaduct(2), true, &env);
    assert_eq!(j.code, Some(0), "{}", j.stderr);
    assert!(
        j.stderr.contains("rank 1 aborted the job (exit code 0)"),
        "{}",
        j.stderr
    );
    if s.mpiexec {
        let j = job(s, "fatal", Launch::Mpiexec(2), true, &env);
        assert_eq!(j.code, Some(0), "{}", j.stderr);
    }
}

/// A function of `mpi.h` the library does not implement loads, and calling it raises
/// `MPI_ERR_UNSUPPORTED_OPERATION` naming it: fatal by default, returned under
/// `MPI_ERRORS_RETURN`.
#[test]
fn unsupported_function_is_reported() {
    let Some(s) = setup() else { return };
    let on = [("TEST_UNSUPPORTED", "1")];
    let j = job(s, "fatal", Launch::Viaduct(2), true, &on);
    // The launcher reports the first rank to fail: rank 0 (exit code 44, the class), or rank 1
    // when it saw rank 0 go first (its own fatal error, the peer's failure).
    assert_ne!(j.code, Some(0), "the job must fail:\n{}", j.stderr);
    assert!(
        j.stderr
            .contains("fatal error in MPI_Close_port: Unsupported operation (class 44)"),
        "{}",
        j.stderr
    );
    let j = job(s, "errors", Launch::Viaduct(2), true, &on);
    let r = assert_ok(&j, "errors with an unsupported call", 2);
    assert!(r.contains(&"rank 0: unsupported function reported".to_string()));
}

/// `scripts/mpicc` links a program against viaduct directly: it runs with no library path set.
#[test]
fn direct_link_with_scripts_mpicc() {
    let Some(s) = setup() else { return };
    let bin = s.bins.join("env-direct");
    checked(
        Command::new(s.root.join("scripts/mpicc"))
            .arg(s.root.join("mpi/tests/c/env.c"))
            .arg("-o")
            .arg(&bin)
            .current_dir(&s.root),
        "scripts/mpicc env.c",
    );
    let mut cmd = Command::new(&s.launcher);
    cmd.args(["launch", "-n", "2", "--"])
        .arg(&bin)
        .env_remove("LD_LIBRARY_PATH")
        .env("TEST_SHOW_LIBRARY", "1");
    let j = run(cmd);
    assert_ok(&j, "env linked by scripts/mpicc", 2);
    assert!(j.stderr.contains("library: viaduct MPI"), "{}", j.stderr);
}

/// Every function MPICH's library exports under an MPI name has a symbol here too, so any
/// program built against MPICH loads; and `mpi/src/stubs.rs` is what `mpi/gen/stubs.py`
/// generates from the headers.
#[test]
fn every_mpich_function_has_a_symbol() {
    let Some(s) = setup() else { return };
    let ours = s.lib_dir.join("libmpich.so.12");
    let theirs = Path::new("/usr/lib/x86_64-linux-gnu/libmpich.so.12");
    if !theirs.exists() {
        eprintln!("SKIPPED: {} not found", theirs.display());
        return;
    }
    let names = |lib: &Path| -> std::collections::BTreeSet<String> {
        let out = checked(
            Command::new("nm").args(["-D", "--defined-only"]).arg(lib),
            "nm -D",
        );
        out.lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let (_, kind, name) = (f.next()?, f.next()?, f.next()?);
                (matches!(kind, "T" | "W" | "D" | "B" | "R")).then(|| name.to_string())
            })
            .filter(|n| {
                ["MPI_", "PMPI_", "MPIX_", "PMPIX_", "QMPI_"]
                    .iter()
                    .any(|p| n.starts_with(p))
            })
            .collect()
    };
    let mine = names(&ours);
    let missing: Vec<String> = names(theirs).difference(&mine).cloned().collect();
    assert!(
        missing.is_empty(),
        "{} MPICH symbols missing: {missing:?}",
        missing.len()
    );
    if have("python3") {
        checked(
            Command::new("python3")
                .arg(s.root.join("mpi/gen/stubs.py"))
                .arg("--check"),
            "mpi/gen/stubs.py --check",
        );
    }
}

#[test]
fn inter_program() {
    program_at("inter", &[2, 3, 4]);
}

#[test]
fn rma_program() {
    program_at("rma", &[2, 3, 4]);
}

#[test]
fn rmathreads_program() {
    program_at_both("rmathreads", &[2]);
}

/// A rank polling its own window (`MPI_Win_sync`, `MPI_Win_flush` to itself) lets other
/// ranks' exclusive locks and accumulates in, as Fortran coarray events need; compared with
/// MPICH. Viaduct also serves them in `MPI_Win_sync` alone.
#[test]
fn rmapoll_program() {
    program_at_both("rmapoll", &[2, 4]);
    let Some(s) = setup() else { return };
    let j = job(
        s,
        "rmapoll",
        Launch::Viaduct(3),
        true,
        &[("RMAPOLL_SYNC_ALONE", "1")],
    );
    let r = assert_ok(&j, "rmapoll with MPI_Win_sync alone", 3);
    assert!(
        r.contains(&"rank 0: sync alone: counter 100".to_string()),
        "{r:?}"
    );
}

/// Counts past 32 bits: large-count datatypes (sizes, envelopes, contents) and a message of
/// 2^31 + 8 bytes by `MPI_Send_c`/`MPI_Recv_c`; compared with MPICH.
#[test]
fn lcount_program() {
    program_at_both("lcount", &[2]);
}

/// A partitioned receive started before its sender's init, its process then blocked in a plain
/// `MPI_Recv` that waits for the sender to finish its partitioned send (1 MiB, a rendezvous);
/// compared with MPICH.
/// Many gets in one fence epoch, sent on before the closing fence.
#[test]
fn rmamany_program() {
    program("rmamany");
}

#[test]
fn partlate_program() {
    program_at_both("partlate", &[2, 3]);
}

#[test]
fn pscw_program() {
    program_at("pscw", &[2, 3, 4]);
}

#[test]
fn rmalock_program() {
    program_at_both("rmalock", &[2, 3, 4]);
}

#[test]
fn rmadynamic_program() {
    program_at_both("rmadynamic", &[2, 3, 4]);
}

#[test]
fn rmashared_program() {
    program_at_both("rmashared", &[2, 3, 4]);
}

#[test]
fn mprobe_program() {
    program_at("mprobe", &[2, 3, 4]);
}

#[test]
fn types2_program() {
    program("types2");
}

#[test]
fn largecount_program() {
    program_at_both("largecount", &[2, 4]);
}

#[test]
fn mpit_program() {
    program("mpit");
    let Some(s) = setup() else { return };
    // A single process, and a setting given in the environment: the program checks that
    // viaduct's control variable VIADUCT_EAGER_LIMIT reads it, before MPI_Init and after.
    assert_ok(
        &job(s, "mpit", Launch::Alone, true, &[]),
        "mpit alone on viaduct",
        1,
    );
    assert_ok(
        &job(
            s,
            "mpit",
            Launch::Viaduct(2),
            true,
            &[("VIADUCT_EAGER_LIMIT", "12345")],
        ),
        "mpit on viaduct with VIADUCT_EAGER_LIMIT=12345",
        2,
    );
}
