//! The no-progress stop (SPEC §15, `runner.max_stalled_loops`): when that many loops
//! in a row each leave the repository as the loop before left it (the in-container
//! snapshot's status and diff stat) and end with the same test outcome (exit code
//! and the last 4 KiB of masked output), more paid loops are unlikely to change
//! anything. Read from the task's
//! history alone, so it needs no state of its own. Without git in the image the
//! tools volume's helper lists the files (SPEC §21), and their digest stands for the
//! repository. A loop whose repository state is not known (neither, or not a
//! repository) never counts: the task is never stopped on a guess.

use crate::context::TaskContext;
use agent_runner_core::text::tail;
use agent_runner_sandbox::worker::git::{DiffStat, GitState, RepoChanges};

/// How much of a test's output the comparison looks at.
const OUTPUT_COMPARED: usize = 4 * 1024;

/// Whether each of the last `n` loops left the repository as the loop before it
/// did (the first loop: as it was before the first worker run) and all `n` ended
/// with the same test outcome (never with `n` = 0). Comparing `n` end states alone
/// would let the window's first loop be one that changed the repository: with
/// `n` = 1 every loop would be "stalled".
pub(crate) fn stalled(ctx: &TaskContext, n: u32) -> bool {
    if n == 0 || ctx.loops < n {
        return false;
    }
    let first = ctx.loops - n + 1;
    let Some(start) = repo(ctx, first - 1) else {
        return false;
    };
    let outcome = test(ctx, first);
    (first..=ctx.loops)
        .all(|number| repo(ctx, number).as_ref() == Some(&start) && test(ctx, number) == outcome)
}

/// The repository at one moment, as far as the comparison goes.
#[derive(Debug, PartialEq, Eq)]
enum Repo<'a> {
    /// git's status and diff stat.
    Git(&'a GitState, &'a [DiffStat]),
    /// The helper's digest of every file.
    Files(&'a str),
}

/// The repository at the end of loop `number`, 0 being before the first worker
/// run; None when not known.
fn repo(ctx: &TaskContext, number: u32) -> Option<Repo<'_>> {
    // A loop without a worker run (Meta claimed completion) left the repository as
    // the last run did.
    match ctx.worker_runs.iter().rev().find(|r| r.number <= number) {
        Some(run) => match &run.changes {
            RepoChanges::Seen { after, diff, .. } => Some(Repo::Git(after, diff.as_slice())),
            RepoChanges::Files { after, .. } => Some(Repo::Files(after)),
            _ => None,
        },
        None => match &ctx.worker_runs.first()?.changes {
            RepoChanges::Seen { before, .. } => Some(Repo::Git(before, &[])),
            RepoChanges::Files { before, .. } => Some(Repo::Files(before)),
            _ => None,
        },
    }
}

/// Loop `number`'s test outcome: exit code, timed out, the end of its output.
fn test(ctx: &TaskContext, number: u32) -> Option<(Option<i32>, bool, String)> {
    ctx.test_runs
        .iter()
        .rev()
        .find(|t| t.number == number)
        .map(|t| {
            (
                t.exit_code,
                t.timed_out,
                tail(&t.output_tail, OUTPUT_COMPARED),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_core::timestamp::Timestamp;
    use agent_runner_sandbox::worker::{TestRun, WorkerRun};
    use agent_runner_settings::agent::{RunOutcome, Transcript};
    use std::time::Duration;

    fn state(status: &[&str]) -> GitState {
        GitState {
            head: Some("abc".into()),
            status: status.iter().map(|s| s.to_string()).collect(),
            more: 0,
        }
    }

    fn worker(number: u32, changes: RepoChanges) -> WorkerRun {
        WorkerRun {
            number,
            started: Timestamp::now(),
            finished: Timestamp::now(),
            duration: Duration::ZERO,
            exit_code: Some(0),
            outcome: RunOutcome::Completed,
            summary: String::new(),
            transcript: Transcript::default(),
            log_path: "/dev/null".into(),
            output_bytes: 0,
            output_tail: String::new(),
            changes,
            leftovers: None,
            privileges: vec![],
            usage: Default::default(),
        }
    }

    fn test(number: u32, code: i32, output: &str) -> TestRun {
        TestRun {
            number,
            command: "t".into(),
            cwd: String::new(),
            started: Timestamp::now(),
            duration: Duration::ZERO,
            exit_code: Some(code),
            timed_out: false,
            interrupted: false,
            output_tail: output.into(),
            log_path: "/dev/null".into(),
            leftovers: None,
            privileges: vec![],
        }
    }

    fn seen(status: &[&str], added: u64) -> RepoChanges {
        RepoChanges::Seen {
            before: state(&[]),
            after: state(status),
            diff: vec![DiffStat {
                added: Some(added),
                deleted: Some(0),
                path: "x".into(),
            }],
        }
    }

    /// A context with one loop per `(repo, test exit, test output)`.
    fn history(loops: &[(RepoChanges, i32, &str)]) -> TaskContext {
        let mut ctx = TaskContext::new(agent_runner_settings::task::test_task(""));
        for (n, (changes, code, output)) in loops.iter().enumerate() {
            let number = n as u32 + 1;
            ctx.worker_runs.push(worker(number, changes.clone()));
            ctx.test_runs.push(test(number, *code, output));
            ctx.loops = number;
        }
        ctx
    }

    #[test]
    fn n_loops_that_changed_nothing_and_only_then() {
        let same = || (seen(&[" M x"], 1), 1, "1 failed");
        // Loop 1 changed the clean repository; loops 2 and 3 left it as it was.
        let ctx = history(&[same(), same(), same()]);
        assert!(!stalled(&ctx, 3), "the first loop changed the repository");
        assert!(stalled(&ctx, 2));
        assert!(stalled(&ctx, 1));
        let ctx = history(&[same()]);
        assert!(!stalled(&ctx, 1), "one loop that changed the repository");
        let nothing = RepoChanges::Seen {
            before: state(&[]),
            after: state(&[]),
            diff: vec![],
        };
        let ctx = history(&[(nothing, 1, "1 failed")]);
        assert!(stalled(&ctx, 1), "one loop that changed nothing");
        let ctx = history(&[same(), same(), same(), same()]);
        assert!(stalled(&ctx, 3));
        assert!(!stalled(&ctx, 0), "0 turns the stop off");
        let ctx = history(&[same(), same(), (seen(&[" M x"], 2), 1, "1 failed"), same()]);
        assert!(!stalled(&ctx, 3), "the diff stat changed");
        let ctx = history(&[
            same(),
            same(),
            (seen(&[" M x", "?? y"], 1), 1, "1 failed"),
            same(),
        ]);
        assert!(!stalled(&ctx, 3), "the status changed");
        let ctx = history(&[same(), same(), (seen(&[" M x"], 1), 2, "1 failed"), same()]);
        assert!(!stalled(&ctx, 3), "the exit code changed");
        let ctx = history(&[same(), same(), (seen(&[" M x"], 1), 1, "2 failed"), same()]);
        assert!(!stalled(&ctx, 3), "the output changed");
        let long = |end: &str| format!("{}{end}", "x".repeat(10_000));
        let (a, b) = (long("a"), long("b"));
        let ctx = history(&[
            (seen(&[], 1), 1, &a),
            (seen(&[], 1), 1, &a),
            (seen(&[], 1), 1, &b),
            (seen(&[], 1), 1, &a),
        ]);
        assert!(!stalled(&ctx, 3), "the last 4 KiB differ");
        let ctx = history(&[
            (RepoChanges::NoGit, 1, "x"),
            (RepoChanges::NoGit, 1, "x"),
            (RepoChanges::NoGit, 1, "x"),
            (RepoChanges::NoGit, 1, "x"),
        ]);
        assert!(!stalled(&ctx, 3), "without snapshots nothing is known");
    }

    #[test]
    fn without_git_the_helpers_digests_decide() {
        let files = |before: &str, after: &str| RepoChanges::Files {
            before: before.into(),
            after: after.into(),
            changed: vec![],
        };
        let ctx = history(&[
            (files("d0", "d1"), 1, "x"),
            (files("d1", "d1"), 1, "x"),
            (files("d1", "d1"), 1, "x"),
        ]);
        assert!(stalled(&ctx, 2), "loops 2 and 3 left d1 as loop 1 did");
        assert!(!stalled(&ctx, 3), "loop 1 changed d0 into d1");
    }

    #[test]
    fn a_loop_without_a_worker_run_keeps_the_last_runs_repository() {
        let mut ctx = history(&[(seen(&[" M x"], 1), 1, "f")]);
        for number in 2..=3 {
            ctx.test_runs.push(test(number, 1, "f"));
            ctx.loops = number;
        }
        assert!(stalled(&ctx, 2));
        assert!(!stalled(&ctx, 3), "loop 1 changed the repository");
    }
}
