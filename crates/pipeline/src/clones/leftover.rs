//! Directories an orchestrator makes for itself in the workspace (spare clones, its
//! bundler's output) and removes when it ends. A killed orchestrator cannot, so they
//! are named after it, `<prefix><where>-<pid>-<start>-<random>` (`where`: a hash of
//! host, boot and PID namespace), and the next orchestrator removes those whose
//! maker is certainly gone: same host, boot and namespace, and that pid not running
//! since that start time.

use std::path::Path;

use agent_runner_core::owner::Owner;

/// A new name with `prefix` for a directory of this process.
pub(crate) fn name(prefix: &str) -> String {
    let me = Owner::this_process();
    format!(
        "{prefix}{}-{}-{}-{}",
        place(&me),
        me.pid,
        me.start_time,
        crate::store::id::random_hex(6)
    )
}

/// Removes the entries of `dir` named with `prefix` by a process that is gone.
pub(crate) fn sweep(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = Owner::this_process();
    let here = place(&me);
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(prefix) else {
            continue;
        };
        let parts: Vec<&str> = rest.split('-').collect();
        let [at, pid, start, _] = parts[..] else {
            continue;
        };
        let Ok(pid) = pid.parse() else { continue };
        let maker = Owner {
            pid,
            start_time: start.to_string(),
            ..me.clone()
        };
        if at == here && maker.is_gone() {
            log::info!(
                "removing {}: left by a stopped orchestrator",
                entry.path().display()
            );
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Host, boot and PID namespace, hashed: pids mean something only within them.
fn place(owner: &Owner) -> String {
    let key = format!("{}\0{}\0{}", owner.host, owner.boot_id, owner.pid_namespace);
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, key.as_bytes())
        .simple()
        .to_string()[..8]
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_a_gone_process_left_here_is_removed() {
        let dir =
            std::env::temp_dir().join(format!("ar-leftover-{}", crate::store::id::random_hex(8)));
        let mine = dir.join(name(".spare-"));
        std::fs::create_dir_all(&mine).unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let pid = gone.id();
        gone.wait().unwrap();
        let here = place(&Owner::this_process());
        let dead = dir.join(format!(".spare-{here}-{pid}-12345-abcdef"));
        let elsewhere = dir.join(format!(".spare-0badc0de-{pid}-12345-abcdef"));
        let other = dir.join(format!("j-{pid}"));
        for d in [&dead, &elsewhere, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        sweep(&dir, ".spare-");
        assert!(mine.is_dir(), "ours: we run");
        assert!(!dead.exists(), "its maker is gone");
        assert!(
            elsewhere.is_dir(),
            "another host, boot or namespace: cannot tell"
        );
        assert!(other.is_dir(), "not ours to judge");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
