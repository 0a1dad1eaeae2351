//! Tests that need no Docker daemon: the code's layout, the documentation, Meta over
//! HTTP, Task YAML validation.

mod architecture;
mod compatibility;
mod docs;
mod eval;
mod meta;
mod validate;
