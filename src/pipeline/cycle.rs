//! Dependency cycles. Tasks name their dependencies by id (`depends_on`, SPEC §11),
//! and nothing stops a hand-written or foreign file from closing a loop; a task on
//! one would wait for itself forever. The orchestrator refuses such a job instead,
//! naming the loop.

use std::collections::HashSet;

/// A dependency path from `start` back to itself (`[start, .., start]`), if there is
/// one; `depends_on` gives a task's dependencies (empty for an unknown task). Each
/// task is looked up at most once.
pub fn cycle_through(
    start: &str,
    mut depends_on: impl FnMut(&str) -> Vec<String>,
) -> Option<Vec<String>> {
    // Depth-first, with an explicit stack: a long chain must not overflow ours.
    let mut seen: HashSet<String> = HashSet::from([start.to_string()]);
    let mut path: Vec<(String, Vec<String>)> = vec![(start.to_string(), depends_on(start))];
    while let Some((_, pending)) = path.last_mut() {
        let Some(next) = pending.pop() else {
            path.pop();
            continue;
        };
        if next == start {
            let mut cycle: Vec<String> = path.into_iter().map(|(id, _)| id).collect();
            cycle.push(next);
            return Some(cycle);
        }
        if seen.insert(next.clone()) {
            let deps = depends_on(&next);
            path.push((next, deps));
        }
    }
    None
}

/// `a → b → a`.
pub fn show(cycle: &[String]) -> String {
    cycle.join(" → ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn graph(edges: &[(&str, &[&str])]) -> HashMap<String, Vec<String>> {
        edges
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    fn find(g: &HashMap<String, Vec<String>>, start: &str) -> Option<String> {
        let mut lookups = 0;
        let found = cycle_through(start, |id| {
            lookups += 1;
            g.get(id).cloned().unwrap_or_default()
        });
        assert!(lookups <= g.len() + 1, "each task looked up once");
        found.map(|c| show(&c))
    }

    #[test]
    fn finds_the_loop_back_to_the_start_only() {
        let g = graph(&[
            ("a", &["b"]),
            ("b", &["c", "x"]),
            ("c", &["a"]),
            ("d", &["a"]),
            ("self", &["self"]),
            ("e", &["f", "f"]),
            ("f", &[]),
        ]);
        assert_eq!(find(&g, "a").as_deref(), Some("a → b → c → a"));
        assert_eq!(find(&g, "c").as_deref(), Some("c → a → b → c"));
        assert_eq!(find(&g, "self").as_deref(), Some("self → self"));
        assert_eq!(find(&g, "d"), None, "it waits on a cycle, but is not on it");
        assert_eq!(find(&g, "e"), None, "a diamond is no cycle");
        assert_eq!(find(&g, "nope"), None);
    }

    #[test]
    fn a_long_chain_does_not_overflow() {
        let n = 200_000;
        let found = cycle_through("0", |id| {
            let i: usize = id.parse().unwrap();
            vec![((i + 1) % n).to_string()]
        });
        assert_eq!(found.map(|c| c.len()), Some(n + 1));
    }
}
