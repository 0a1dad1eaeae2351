//! Stopping a task's job (SPEC §19).
