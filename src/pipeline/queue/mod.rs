pub mod board;
pub mod board_cache;
pub mod claimant;
pub mod jobs;
pub mod run_request;
pub mod status;
pub mod task_json;
