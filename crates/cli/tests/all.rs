//! The integration tests, one binary: they drive the real `agent-runner` binary, the
//! real Docker daemon and fake internet servers on the loopback (`support`). Its
//! top-level modules say what a test needs beyond the binary, so that
//! `cargo test --test all fast::` runs what a machine without Docker can:
//! - `fast`: nothing else;
//! - `docker`: the daemon and the test worker images (`make test-env`);
//! - `k8s_cluster`: the Kubernetes test cluster (`make test-cluster`);
//! - `image`: the real Codex CLI and Claude Code in the real worker image
//!   agent-runner-codex:latest (`make sandbox-image`).
//!
//! A new test file goes into the folder of what it needs, with a `mod` line in that
//! folder's `mod.rs`. A test that needs root, Chromium or the real image checks it
//! first (`support::prerequisite`). `harness` holds what testdata/test.sh runs
//! before the tests (the run's shared remote hosts), not tests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails where it unwraps

mod docker;
mod fast;
mod harness;
mod image;
mod k8s_cluster;
mod support;
