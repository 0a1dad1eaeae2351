//! Tests that need the Docker daemon and the test worker images
//! (testdata/setup-docker.sh): whole tasks, the sandbox, the pipeline, the web view.

mod approval;
mod argv;
mod boundary;
mod browser;
mod budget;
mod build_output;
mod bundler;
mod codex_builder;
mod deliver;
mod dependencies;
mod doctor;
mod egress;
mod environment;
mod follow_up;
mod hosts;
mod isolation;
mod meta_apis;
mod notify;
mod orchestrator;
mod pipeline;
mod plan;
mod podman;
mod remote;
mod resume;
mod run;
mod sandbox;
mod secrets;
mod signals;
mod spending;
mod test_image;
mod tools_volume;
mod verification;
mod watch;
mod web;
