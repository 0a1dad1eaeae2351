//! `agent-runner serve` (SPEC §14): a small web view over a workspace's files, the
//! IDE of the seed's golden test: a chat box that creates tasks (or plans), the task
//! list with live statuses, Run buttons, a task's detail (summary, validation,
//! attempts, a best of N run's `comparison`, the Task Note, logs), the plan tree, the evaluations' pass rates (`eval_page`, SPEC §26), and whether an orchestrator runs.
//!
//! The files stay the truth: every request reads them again, and every change is
//! the same operation as on the command line (`task new`, `task run`, or `plan` and
//! `orchestrate` started as child processes), so the CLI, an orchestrator and this
//! view can be used side by side.
//!
//! Everything a page shows may come from outside (titles, prompts, notes, worker
//! output), and any web page the user opens may try to reach this server, so: it
//! listens on loopback unless told otherwise, there on both loopback addresses
//! (`listen`); it answers only its own user's connections, checked as they are
//! accepted (`peer`, `server`); every request passes the Host check (the address
//! it came to, never a name) and every change the Origin, token and content-type
//! checks (`guard`); all text is
//! escaped (`html`, `markdown`); files are served only as the TaskStore names them,
//! never followed through a symlink (`files`); requests are bounded (`http`); no
//! inline script runs (`server::CSP`).
//!
//! Synchronous: a fixed pool of threads, one request per connection.

mod api;
mod app;
mod assets;
mod children;
mod comparison;
mod eval_page;
mod files;
mod guard;
mod html;
mod http;
mod listen;
mod markdown;
mod pages;
mod peer;
mod routes;
mod server;
mod token;

use std::net::TcpListener;
use std::path::PathBuf;

use super::Workspace;
use agent_runner_core::interrupt::Interrupt;

pub use listen::{CannotListen, listen};

/// Serves the web view of `ws` on `listeners` (from `listen`; the first is the
/// address asked for) until `interrupt` is set. `exe` is this binary, run for
/// `plan` and `orchestrate`.
pub fn serve(
    ws: Workspace,
    listeners: Vec<TcpListener>,
    exe: PathBuf,
    interrupt: Interrupt,
) -> std::io::Result<()> {
    let addr = listeners
        .first()
        .ok_or_else(|| std::io::Error::other("no listening socket"))?
        .local_addr()?;
    let token = token::Token::generate()?;
    let children = children::Children::new(
        exe,
        ws.root_dir.clone(),
        ws.logs_dir().join("serve-orchestrator.log"),
        interrupt,
    );
    let app = app::App {
        guard: guard::Guard::new(addr, token),
        children,
        boards: crate::queue::board_cache::BoardCache::default(),
        ws,
    };
    server::run(app, listeners, interrupt)
}
