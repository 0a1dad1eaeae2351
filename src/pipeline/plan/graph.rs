//! Dependency cycles: a plan whose tasks wait on each other in a ring could never
//! run, so a reply that makes one is invalid (and asked again, naming the ring).

use std::collections::HashMap;

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

#[cfg(test)]
mod tests {
    use super::*;

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
