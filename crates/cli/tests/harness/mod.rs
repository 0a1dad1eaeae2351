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
