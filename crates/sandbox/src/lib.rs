//! The worker's sandbox: the sandbox the agent and the tests run in (`worker`) and
//! the mechanism under it (`backend`: Docker, the repository bind-mounted or copied,
//! the egress link as a socket mount or the lifeline, the C helpers). Reads its
//! settings from `agent_runner_settings` and runs the proxy of `agent_runner_egress`;
//! knows nothing of Meta or the runner's state machine.

pub mod backend;
pub mod worker;
