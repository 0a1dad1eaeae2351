//! Entry points of testdata/test.sh, not tests: each runs only when test.sh names it
//! (`--run-ignored only` and its exact name) with the variables it sets.

use std::path::Path;

use crate::support::remote_hosts;

/// The emulated remote Docker hosts the whole run shares, started once before the
/// tests (nextest runs each test in a process of its own, which would otherwise
/// start a set each); test.sh removes them when the run ends.
#[test]
#[ignore = "harness: testdata/test.sh starts the run's remote hosts with it"]
fn remote_hosts_up() {
    let (Some(file), Ok(owner)) = (
        std::env::var_os("AGENT_RUNNER_TEST_HOSTS_UP"),
        std::env::var("AGENT_RUNNER_TEST_HOSTS_OWNER"),
    ) else {
        panic!("run by testdata/test.sh, which sets AGENT_RUNNER_TEST_HOSTS_UP and _OWNER");
    };
    remote_hosts::up(Path::new(&file), &owner);
}

/// The pinned agents' tarballs, kept in the directory the run's npm registry serves
/// (testdata/test.sh: a static server on the loopback, `NPM_CONFIG_REGISTRY`), so
/// that no test reaches the real registry: fetched from it here once per machine,
/// each checked against its pinned sha512.
#[test]
#[ignore = "harness: testdata/test.sh fills the run's npm registry with it"]
fn npm_cache_fill() {
    use agent_runner_sandbox::backend::tools;
    let Some(dir) = std::env::var_os("AGENT_RUNNER_TEST_NPM_CACHE") else {
        panic!("run by testdata/test.sh, which sets AGENT_RUNNER_TEST_NPM_CACHE");
    };
    let dir = Path::new(&dir);
    const BASE: &str = "http://registry";
    for package in tools::PACKAGES {
        let url = tools::tarball_url(BASE, &package);
        let to = dir.join(&url[BASE.len() + 1..]);
        if to.exists() {
            continue;
        }
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let partial = to.with_extension("part");
        let interrupt = agent_runner_core::interrupt::Interrupt::never();
        match tools::download(&package, &partial, interrupt) {
            Ok(size) => eprintln!("npm cache: {} ({size} bytes)", to.display()),
            Err(e) => panic!("filling the npm cache: {e}"),
        }
        std::fs::rename(&partial, &to).unwrap();
    }
}
