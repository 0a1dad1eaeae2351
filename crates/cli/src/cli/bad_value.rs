//! A value on the command line that its parser refuses, as clap shows it after
//! `invalid value … for '--flag':`.

/// Which value, and what was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadValue {
    #[error("expected a date YYYY-MM-DD (got {0:?})")]
    Date(String),
    #[error("{0:?}: expected infra_error, unresolved or all")]
    Rerun(String),
    #[error("{0:?} is not IP:PORT (e.g. 127.0.0.1:8765; port 0 picks a free one)")]
    Addr(String),
    #[error("must be a positive number of USD (got {0:?})")]
    Usd(String),
}
