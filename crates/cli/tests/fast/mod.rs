//! Tests that need no Docker daemon: the code's layout, Meta over HTTP, Task YAML
//! validation.

mod architecture;
mod meta;
mod validate;
