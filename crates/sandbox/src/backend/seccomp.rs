//! The seccomp profile of every container agent-runner starts (SPEC §9): Docker's
//! default protections, and no setuid or setgid bit on any file, at any moment.
//!
//! Why: the worker is root in its container when agent-runner runs as root, so a file
//! it makes setuid in the bind-mounted repository is a setuid-root program on the host
//! for as long as it is there, and any local user can run it. The sweep after each run
//! (`privileges.rs`) comes too late for that; it stays as the second line. So every
//! system call that takes a file mode (`MODE_CALLS`) is allowed only when the mode has
//! neither S_ISUID nor S_ISGID, and fails with EPERM otherwise: a build that sets
//! ordinary modes works, and `cp -p`, `tar -x` or `install -m` of a set-id file fail
//! on that bit, as they end in these calls. `openat2` carries its mode in a struct
//! seccomp cannot read: it answers ENOSYS, and libc and programs fall back to
//! `openat`. io_uring, which opens files without system calls, is not allowed (nor in
//! Docker's own default since 25.0). File capabilities (`security.capability`) need
//! CAP_SETFCAP, which no container of ours has.
//!
//! A profile given with `--security-opt seccomp=` replaces the daemon's, so this one
//! carries Docker's default rules for a container without CAP_SYS_ADMIN, written from
//! moby's `profiles/seccomp/default.json`: the system calls it allows, its socket
//! families and personalities, `clone` without namespace flags, `clone3` answering
//! ENOSYS. One more refusal than Docker's: `ptrace`, `process_vm_readv` and
//! `process_vm_writev` (which moby allows from kernel 4.8) answer EPERM, so nothing
//! in the sandbox can read or write another process's memory or registers by a system
//! call: not PID 1 or the carrier, not the envelope around an exec (SPEC §9; the way
//! through `/proc/<pid>/mem` is closed by PID 1 and the carrier being non-dumpable,
//! `backend/helper/init.c`). Debuggers, `strace` and LeakSanitizer do not work in the
//! sandbox for that. The capabilities that would
//! add system calls to that profile (SYS_ADMIN, SYS_PTRACE, …) are never given to our
//! containers. Architectures: x86-64 (with x86 and x32) and arm64 (with arm).
//!
//! The docker CLI reads the profile on the client side and sends its content to the
//! daemon, so it works with any daemon the CLI reaches; it reads it from an anonymous
//! file in memory (`Invocation::input_file`), so no file is left anywhere.

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use agent_runner_core::process::{INPUT_FILE, Invocation};

/// The set-id bits no mode may carry.
const SET_ID: u32 = 0o6000;
/// Docker's errno for a refused call, and the one for a call to fall back from.
const EPERM: u32 = 1;
const ENOSYS: u32 = 38;

/// The system calls that take a file mode, each with the index of its mode argument.
pub(crate) const MODE_CALLS: [(&str, u32); 11] = [
    ("chmod", 1),
    ("fchmod", 1),
    ("fchmodat", 2),
    ("fchmodat2", 2),
    ("open", 2),
    ("openat", 3),
    ("creat", 1),
    ("mknod", 1),
    ("mknodat", 2),
    ("mkdir", 1),
    ("mkdirat", 2),
];

/// What Docker's default profile allows unconditionally, less `MODE_CALLS` and
/// `openat2` (names the machine's libseccomp does not know are skipped by the runtime).
const ALLOWED: &str = "
_llseek _newselect accept accept4 access adjtimex alarm bind brk cachestat capget
capset chdir chown chown32 clock_adjtime clock_adjtime64 clock_getres
clock_getres_time64 clock_gettime clock_gettime64 clock_nanosleep
clock_nanosleep_time64 close close_range connect copy_file_range dup dup2 dup3
epoll_create epoll_create1 epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2
epoll_wait epoll_wait_old eventfd eventfd2 execve execveat exit exit_group
faccessat faccessat2 fadvise64 fadvise64_64 fallocate fanotify_mark fchdir fchown
fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr flistxattr flock fork
fremovexattr fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64 fsync ftruncate
ftruncate64 futex futex_requeue futex_time64 futex_wait futex_waitv futex_wake
futimesat get_robust_list get_thread_area getcpu getcwd getdents getdents64 getegid
getegid32 geteuid geteuid32 getgid getgid32 getgroups getgroups32 getitimer
getpeername getpgid getpgrp getpid getppid getpriority getrandom getresgid
getresgid32 getresuid getresuid32 getrlimit getrusage getsid getsockname getsockopt
gettid gettimeofday getuid getuid32 getxattr getxattrat inotify_add_watch
inotify_init inotify_init1 inotify_rm_watch io_cancel io_destroy io_getevents
io_pgetevents io_pgetevents_time64 io_setup io_submit ioctl ioprio_get ioprio_set
ipc kill landlock_add_rule landlock_create_ruleset landlock_restrict_self lchown
lchown32 lgetxattr link linkat listen listmount listxattr listxattrat llistxattr
lremovexattr lseek lsetxattr lstat lstat64 madvise map_shadow_stack membarrier
memfd_create memfd_secret mincore mlock mlock2 mlockall mmap mmap2 mprotect
mq_getsetattr mq_notify mq_open mq_timedreceive mq_timedreceive_time64 mq_timedsend
mq_timedsend_time64 mq_unlink mremap mseal msgctl msgget msgrcv msgsnd msync
munlock munlockall munmap name_to_handle_at nanosleep newfstatat pause pidfd_open
pidfd_send_signal pipe pipe2 pkey_alloc pkey_free pkey_mprotect poll ppoll
ppoll_time64 prctl pread64 preadv preadv2 prlimit64 process_mrelease pselect6
pselect6_time64 pwrite64 pwritev pwritev2 read readahead readlink readlinkat readv
recv recvfrom recvmmsg recvmmsg_time64 recvmsg remap_file_pages removexattr
removexattrat rename renameat renameat2 restart_syscall riscv_hwprobe rmdir rseq
rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn
rt_sigsuspend rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo
sched_get_priority_max sched_get_priority_min sched_getaffinity sched_getattr
sched_getparam sched_getscheduler sched_rr_get_interval
sched_rr_get_interval_time64 sched_setaffinity sched_setattr sched_setparam
sched_setscheduler sched_yield seccomp select semctl semget semop semtimedop
semtimedop_time64 send sendfile sendfile64 sendmmsg sendmsg sendto set_robust_list
set_thread_area set_tid_address setfsgid setfsgid32 setfsuid setfsuid32 setgid
setgid32 setgroups setgroups32 setitimer setpgid setpriority setregid setregid32
setresgid setresgid32 setresuid setresuid32 setreuid setreuid32 setrlimit setsid
setsockopt setuid setuid32 setxattr setxattrat shmat shmctl shmdt shmget shutdown
sigaltstack signalfd signalfd4 sigprocmask sigreturn socketcall socketpair splice
stat stat64 statfs statfs64 statmount statx symlink symlinkat sync sync_file_range
syncfs sysinfo tee tgkill time timer_create timer_delete timer_getoverrun
timer_gettime timer_gettime64 timer_settime timer_settime64 timerfd_create
timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64 times tkill
truncate truncate64 ugetrlimit umask uname unlink unlinkat uretprobe utime
utimensat utimensat_time64 utimes vfork vmsplice wait4 waitid waitpid write writev
";

/// The `docker run` options that apply the profile; that `docker run` must be given
/// the profile to read (`with_profile`).
pub(crate) fn run_options() -> [String; 2] {
    ["--security-opt".into(), format!("seccomp={INPUT_FILE}")]
}

/// `invocation`, a `docker run` with `run_options`, given the profile to read.
pub(crate) fn with_profile(invocation: Invocation) -> Invocation {
    invocation.input_file(profile())
}

/// The profile, as the docker CLI reads it.
pub fn profile() -> Arc<[u8]> {
    static PROFILE: OnceLock<Arc<[u8]>> = OnceLock::new();
    PROFILE
        .get_or_init(|| Arc::from(document().to_string().into_bytes()))
        .clone()
}

fn document() -> Value {
    let allowed: Vec<&str> = ALLOWED.split_whitespace().collect();
    let mut rules = vec![
        json!({"names": allowed, "action": "SCMP_ACT_ALLOW"}),
        json!({"names": ["arch_prctl"], "action": "SCMP_ACT_ALLOW",
               "includes": {"arches": ["amd64", "x32"]}}),
        json!({"names": ["modify_ldt"], "action": "SCMP_ACT_ALLOW",
               "includes": {"arches": ["amd64", "x32", "x86"]}}),
        json!({"names": ["arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2",
                         "breakpoint", "cacheflush", "set_tls"],
               "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["arm", "arm64"]}}),
        // Namespaces need CAP_SYS_ADMIN: clone only without their flags, and clone3
        // (whose flags are in a struct) answers ENOSYS so libc falls back to clone.
        json!({"names": ["clone"], "action": "SCMP_ACT_ALLOW",
               "args": [{"index": 0, "value": 0x7E02_0000_u32, "valueTwo": 0,
                         "op": "SCMP_CMP_MASKED_EQ"}]}),
        json!({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS}),
        json!({"names": ["openat2"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS}),
    ];
    // Socket families: all but AF_ALG (38) and AF_VSOCK (40).
    for (op, value) in [
        ("SCMP_CMP_LT", 38),
        ("SCMP_CMP_EQ", 39),
        ("SCMP_CMP_GT", 40),
    ] {
        rules.push(json!({"names": ["socket"], "action": "SCMP_ACT_ALLOW",
                          "args": [{"index": 0, "value": value, "op": op}]}));
    }
    for persona in [0u32, 8, 0x20000, 0x20008, 0xffff_ffff] {
        rules.push(json!({"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                          "args": [{"index": 0, "value": persona, "op": "SCMP_CMP_EQ"}]}));
    }
    for (name, index) in MODE_CALLS {
        rules.push(json!({"names": [name], "action": "SCMP_ACT_ALLOW",
                          "args": [{"index": index, "value": SET_ID, "valueTwo": 0,
                                    "op": "SCMP_CMP_MASKED_EQ"}]}));
    }
    json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": EPERM,
        "archMap": [
            {"architecture": "SCMP_ARCH_X86_64",
             "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
            {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
        ],
        "syscalls": rules,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules as (name, rule) pairs.
    fn rules() -> Vec<(String, Value)> {
        let profile: Value = serde_json::from_slice(&profile()).unwrap();
        let mut out = Vec::new();
        for rule in profile["syscalls"].as_array().unwrap() {
            for name in rule["names"].as_array().unwrap() {
                out.push((name.as_str().unwrap().to_string(), rule.clone()));
            }
        }
        out
    }

    fn rules_of(name: &str) -> Vec<Value> {
        rules()
            .into_iter()
            .filter(|(n, _)| n == name)
            .map(|(_, rule)| rule)
            .collect()
    }

    #[test]
    fn a_mode_is_allowed_only_without_set_id_bits() {
        for (name, index) in MODE_CALLS {
            assert_eq!(
                rules_of(name),
                [json!({"names": [name], "action": "SCMP_ACT_ALLOW",
                        "args": [{"index": index, "value": 0o6000, "valueTwo": 0,
                                  "op": "SCMP_CMP_MASKED_EQ"}]})],
                "{name}"
            );
        }
        assert_eq!(
            rules_of("openat2"),
            [json!({"names": ["openat2"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38})]
        );
    }

    #[test]
    fn what_docker_refuses_stays_refused() {
        let profile: Value = serde_json::from_slice(&profile()).unwrap();
        assert_eq!(profile["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(profile["defaultErrnoRet"], 1);
        for name in [
            "mount",
            "umount2",
            "unshare",
            "setns",
            "pivot_root",
            "chroot",
            "keyctl",
            "add_key",
            "request_key",
            "bpf",
            "perf_event_open",
            "userfaultfd",
            "kexec_load",
            "init_module",
            "finit_module",
            "delete_module",
            "reboot",
            "swapon",
            "acct",
            "settimeofday",
            "clock_settime",
            "open_by_handle_at",
            "quotactl",
            "fsopen",
            "fsmount",
            "move_mount",
            "open_tree",
            "io_uring_setup",
            "io_uring_enter",
            "io_uring_register",
            "iopl",
            "ioperm",
            "vhangup",
            "kcmp",
            "pidfd_getfd",
            // Another process's memory: PID 1's, the carrier's (issue 41).
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
        ] {
            assert!(rules_of(name).is_empty(), "{name} is allowed");
        }
        // clone only without namespace flags; clone3 falls back to it.
        assert_eq!(rules_of("clone")[0]["args"][0]["value"], 0x7E02_0000);
        assert_eq!(rules_of("clone3")[0]["errnoRet"], 38);
    }

    #[test]
    fn each_call_has_one_action() {
        let mut actions = std::collections::BTreeMap::new();
        for (name, rule) in rules() {
            let action = rule["action"].clone();
            let seen = actions
                .entry(name.clone())
                .or_insert_with(|| action.clone());
            assert_eq!(*seen, action, "{name} has two actions");
        }
        // Docker's common calls are there.
        for name in [
            "read", "write", "execve", "fchown", "rename", "statx", "seccomp",
        ] {
            assert_eq!(actions.get(name), Some(&json!("SCMP_ACT_ALLOW")), "{name}");
        }
    }

    #[test]
    fn the_options_name_the_profile_by_the_input_file() {
        assert_eq!(
            run_options(),
            [
                "--security-opt".to_string(),
                "seccomp=/dev/fd/3".to_string()
            ]
        );
    }
}
