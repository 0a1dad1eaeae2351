//! Tests that need the Docker daemon and the test worker images
//! (testdata/setup-docker.sh): whole tasks, the sandbox, the pipeline, the web view.

mod argv;
mod boundary;
mod browser;
mod budget;
mod bundler;
mod codex_builder;
mod dependencies;
mod doctor;
mod egress;
mod isolation;
mod meta_apis;
mod orchestrator;
mod pipeline;
mod plan;
mod remote;
mod resume;
mod run;
mod sandbox;
mod secrets;
mod signals;
mod spending;
mod test_image;
mod verification;
mod watch;
mod web;
