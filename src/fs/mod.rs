pub mod atomic;
pub mod dir;
pub mod jsonl;
pub mod lock;
pub mod read;
