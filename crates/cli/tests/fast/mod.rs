//! Tests that need no Docker daemon: the code's layout, the documentation, Meta over
//! HTTP, Task YAML validation, the test runner's groups.

mod architecture;
mod compatibility;
mod docs;
mod eval;
mod hosts;
mod meta;
mod test_groups;
mod validate;
