//! Dependency cycles. Tasks name their dependencies by id (`depends_on`, SPEC §11);
//! a task on a loop would wait for itself forever. A plan edit that makes one is
//! invalid (`find_cycle` over the whole plan, asked again naming the ring), and since
//! nothing stops a hand-written or foreign file from closing a loop, the orchestrator
//! refuses such a job (`cycle_through`, from the job's task, looking tasks up lazily).

use std::collections::{HashMap, HashSet};

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

/// A cycle among `tasks` (id → the ids it depends on), as the ids along it with
/// the first repeated at the end (`a → b → a`); None when there is none.
/// Dependencies on ids that are not keys are ignored. Iterative, so any depth is fine.
pub fn find_cycle<'a>(tasks: &HashMap<&'a str, Vec<&'a str>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut marks: HashMap<&str, Mark> = tasks.keys().map(|k| (*k, Mark::New)).collect();
    let mut starts: Vec<&str> = tasks.keys().copied().collect();
    // Deterministic: the same plan always names the same ring.
    starts.sort_unstable();
    for start in starts {
        if marks[start] != Mark::New {
            continue;
        }
        // The path being explored, each with the index of its next dependency.
        let mut path: Vec<(&str, usize)> = vec![(start, 0)];
        marks.insert(start, Mark::Open);
        while let Some(&(node, next)) = path.last() {
            let deps = &tasks[node];
            if next == deps.len() {
                marks.insert(node, Mark::Done);
                path.pop();
                continue;
            }
            if let Some(top) = path.last_mut() {
                top.1 += 1;
            }
            let dep = deps[next];
            match marks.get(dep) {
                Some(Mark::New) => {
                    marks.insert(dep, Mark::Open);
                    path.push((dep, 0));
                }
                Some(Mark::Open) => {
                    let from = path.iter().position(|(n, _)| *n == dep).unwrap_or(0);
                    let mut ring: Vec<String> =
                        path[from..].iter().map(|(n, _)| n.to_string()).collect();
                    ring.push(dep.to_string());
                    return Some(ring);
                }
                Some(Mark::Done) | None => {}
            }
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

    mod whole_graph {
        use super::super::find_cycle;
        use std::collections::HashMap;

        fn graph<'a>(edges: &[(&'a str, &[&'a str])]) -> HashMap<&'a str, Vec<&'a str>> {
            edges.iter().map(|(k, v)| (*k, v.to_vec())).collect()
        }

        #[test]
        fn rings_are_named_and_dags_pass() {
            assert_eq!(
                find_cycle(&graph(&[
                    ("a", &["b"]),
                    ("b", &["c"]),
                    ("c", &["a"]),
                    ("d", &[])
                ])),
                Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
            );
            assert_eq!(
                find_cycle(&graph(&[("a", &["a"])])),
                Some(vec!["a".into(), "a".into()])
            );
            assert_eq!(
                find_cycle(&graph(&[("a", &["b", "c"]), ("b", &["c"]), ("c", &["x"])])),
                None
            );
            // A long chain does not overflow anything.
            let ids: Vec<String> = (0..100_000).map(|n| format!("t{n}")).collect();
            let mut g: HashMap<&str, Vec<&str>> = HashMap::new();
            for n in 0..ids.len() {
                g.insert(
                    &ids[n],
                    if n + 1 < ids.len() {
                        vec![&ids[n + 1]]
                    } else {
                        vec![]
                    },
                );
            }
            assert_eq!(find_cycle(&g), None);
            g.insert(&ids[ids.len() - 1], vec![&ids[0]]);
            assert_eq!(find_cycle(&g).map(|r| r.len()), Some(100_001));
        }
    }
}
