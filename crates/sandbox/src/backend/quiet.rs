//! The sandbox made quiet by its main process (SPEC §9): after each command
//! agent-runner ran in it, every other process is killed by PID 1, which is the
//! carrier's helper (`helper/quiet.c`), asked on a channel only agent-runner holds
//! (`Carrier::quiet`: the bridge's stdin, or the lifeline's QUIET frame).
//!
//! Why, beside the envelope's own stop pass: the envelope is a shell of the image
//! and the parent of what it runs, so what it runs can write its memory through
//! `/proc/<pid>/mem` and have it spare anything; PID 1 is non-dumpable
//! (`helper/init.c`), takes no signal from inside, and its pipe is ours.

use std::time::Duration;

/// The request line on the bridge's stdin.
pub(crate) const REQUEST: &str = "quiet";
/// What starts the bridge's answer, before "FOUND LEFT".
pub(crate) const ANSWER: &str = "agent-runner-quiet ";
/// How long the answer may take: the helper kills for 5 s at most.
pub(crate) const WITHIN: Duration = Duration::from_secs(10);

/// What the main process found besides itself, and what it could not kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quiet {
    pub found: u32,
    pub left: u32,
}

impl Quiet {
    /// The helper's "FOUND LEFT"; None for anything else (the answer is the
    /// helper's, but read as hostile all the same).
    pub(crate) fn parse(text: &str) -> Option<Quiet> {
        let mut numbers = text.split_whitespace().map(str::parse::<u32>);
        match (numbers.next(), numbers.next(), numbers.next()) {
            (Some(Ok(found)), Some(Ok(left)), None) => Some(Quiet { found, left }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_two_counts_are_an_answer() {
        assert_eq!(Quiet::parse("3 0"), Some(Quiet { found: 3, left: 0 }));
        assert_eq!(Quiet::parse("0 0\n"), Some(Quiet { found: 0, left: 0 }));
        for bad in ["", "3", "3 x", "-1 0", "1 2 3"] {
            assert_eq!(Quiet::parse(bad), None, "{bad}");
        }
    }
}
