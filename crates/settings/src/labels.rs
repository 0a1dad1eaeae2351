//! The docker labels agent-runner puts on its containers and volumes, in one place:
//! the sweep, the caches and the tests find what is ours by these names, so a
//! second spelling would leave a leftover no sweep removes.

/// The task a container or volume belongs to (its value: the task's name).
pub const TASK: &str = "agent-runner.task";
/// The owning process's pid (with the four below, who owns a leftover: SPEC §22).
pub const OWNER_PID: &str = "agent-runner.owner-pid";
/// The owning process's start time.
pub const OWNER_START: &str = "agent-runner.owner-start";
/// The owning process's host.
pub const OWNER_HOST: &str = "agent-runner.owner-host";
/// The owning host's boot id.
pub const OWNER_BOOT: &str = "agent-runner.owner-boot";
/// The owning process's pid namespace.
pub const OWNER_PIDNS: &str = "agent-runner.owner-pidns";
/// Unix seconds after which a container or volume of ours is a leftover.
pub const EXPIRES: &str = "agent-runner.expires";
/// The tools volume (its digest), its fill's container and the empty image.
pub const TOOLS: &str = "agent-runner.tools";
/// The value of `TOOLS` on a tools fill's container.
pub const TOOLS_FILL: &str = "fill";
/// A session volume's digest.
pub const SESSION: &str = "agent-runner.session";
/// Tells the copy's own containers (the bundler) from the sandbox it serves.
pub const ROLE: &str = "agent-runner.role";
/// A cache volume's repository.
pub const CACHE_REPO: &str = "agent-runner.cache.repo";
/// The path in the sandbox a cache volume is mounted at.
pub const CACHE_PATH: &str = "agent-runner.cache.path";
/// A cache volume's repository key.
pub const CACHE_KEY: &str = "agent-runner.cache.key";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_label_is_in_our_namespace_and_distinct() {
        let all = [
            TASK,
            OWNER_PID,
            OWNER_START,
            OWNER_HOST,
            OWNER_BOOT,
            OWNER_PIDNS,
            EXPIRES,
            TOOLS,
            SESSION,
            ROLE,
            CACHE_REPO,
            CACHE_PATH,
            CACHE_KEY,
        ];
        let distinct: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len());
        assert!(all.iter().all(|l| l.starts_with("agent-runner.")));
    }
}
