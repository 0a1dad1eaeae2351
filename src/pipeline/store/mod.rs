pub mod commits;
pub mod cycle;
pub mod defaults;
pub mod id;
pub mod new_task;
pub mod task_file;
pub mod task_store;
pub mod workspace;
