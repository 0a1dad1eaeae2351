//! Dependency cycles. Tasks name their dependencies by id (`depends_on`, SPEC §11);
//! a task on a loop would wait for itself forever. A plan edit that makes one is
//! invalid (`find_cycle` over the whole plan, asked again naming the ring), and since
//! nothing stops a hand-written or foreign file from closing a loop, the orchestrator
//! refuses such a job: `on_cycles` finds every task on a loop in one pass over the
//! board, and `cycle_through` names the ring of each one refused.

use std::collections::{HashMap, HashSet};

/// A dependency path from `start` back to itself (`[start, .., start]`), if there is
/// one; `depends_on` gives a task's dependencies (empty for an unknown task). Each
/// task is looked up at most once.
pub(crate) fn cycle_through(
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
pub(crate) fn find_cycle<'a>(tasks: &HashMap<&'a str, Vec<&'a str>>) -> Option<Vec<String>> {
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

/// Every task on a cycle of `tasks` (id → the ids it depends on), in time linear in
/// the graph: Tarjan's strongly connected components, iterative so any depth is
/// fine. A task is on a cycle when its component has more than one task, or it
/// depends on itself. Dependencies on ids that are not keys are ignored.
pub(crate) fn on_cycles<'a>(tasks: &HashMap<&'a str, Vec<&'a str>>) -> HashSet<&'a str> {
    struct Node {
        index: usize,
        low: usize,
        on_stack: bool,
    }
    let mut nodes: HashMap<&str, Node> = HashMap::with_capacity(tasks.len());
    let mut stack: Vec<&str> = Vec::new();
    let mut found = HashSet::new();
    let mut next_index = 0;
    for &start in tasks.keys() {
        if nodes.contains_key(start) {
            continue;
        }
        // Each frame: a task and the position of its next dependency.
        let mut path: Vec<(&str, usize)> = vec![(start, 0)];
        nodes.insert(
            start,
            Node {
                index: next_index,
                low: next_index,
                on_stack: true,
            },
        );
        stack.push(start);
        next_index += 1;
        while let Some(&mut (node, ref mut at)) = path.last_mut() {
            let deps = &tasks[node];
            if let Some(&dep) = deps.get(*at) {
                *at += 1;
                if !tasks.contains_key(dep) {
                    continue;
                }
                match nodes.get(dep) {
                    None => {
                        nodes.insert(
                            dep,
                            Node {
                                index: next_index,
                                low: next_index,
                                on_stack: true,
                            },
                        );
                        stack.push(dep);
                        next_index += 1;
                        path.push((dep, 0));
                    }
                    Some(d) if d.on_stack => {
                        let index = d.index;
                        if let Some(n) = nodes.get_mut(node) {
                            n.low = n.low.min(index);
                        }
                    }
                    Some(_) => {}
                }
                continue;
            }
            path.pop();
            let (index, low) = nodes.get(node).map_or((0, 0), |n| (n.index, n.low));
            if let Some(&(parent, _)) = path.last()
                && let Some(p) = nodes.get_mut(parent)
            {
                p.low = p.low.min(low);
            }
            if low == index {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    if let Some(m) = nodes.get_mut(member) {
                        m.on_stack = false;
                    }
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                if component.len() > 1 || tasks[node].contains(&node) {
                    found.extend(component);
                }
            }
        }
    }
    found
}

/// `a → b → a`.
pub(crate) fn show(cycle: &[String]) -> String {
    cycle.join(" → ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A ring a → b → c → a with a way out (x), a task waiting on it (d), a task
    /// on its own ring, and a diamond (e → f twice).
    const EDGES: [(&str, &[&str]); 7] = [
        ("a", &["b"]),
        ("b", &["c", "x"]),
        ("c", &["a"]),
        ("d", &["a"]),
        ("self", &["self"]),
        ("e", &["f", "f"]),
        ("f", &[]),
    ];

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
        let g = graph(&EDGES);
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
        fn every_task_on_a_ring_is_found_and_no_other() {
            use super::super::on_cycles;
            // The rings of `EDGES`, and one more through a task with a way out.
            let mut edges = super::EDGES.to_vec();
            edges.extend([("g", &["h"][..]), ("h", &["g", "e"])]);
            let g = graph(&edges);
            let mut found: Vec<&str> = on_cycles(&g).into_iter().collect();
            found.sort_unstable();
            assert_eq!(found, ["a", "b", "c", "g", "h", "self"]);
            // A long chain is no cycle, and closing it makes every task one.
            let ids: Vec<String> = (0..100_000).map(|n| format!("t{n}")).collect();
            let mut g: HashMap<&str, Vec<&str>> = HashMap::new();
            for n in 0..ids.len() {
                g.insert(
                    &ids[n],
                    ids.get(n + 1).map(|s| vec![s.as_str()]).unwrap_or_default(),
                );
            }
            assert!(on_cycles(&g).is_empty());
            g.insert(&ids[ids.len() - 1], vec![&ids[0]]);
            assert_eq!(on_cycles(&g).len(), ids.len());
        }

        quickcheck::quickcheck! {
            /// On any small graph: on a cycle exactly when a task reaches itself.
            fn on_cycles_agrees_with_reaching_oneself(edges: Vec<(u8, u8)>) -> bool {
                use super::super::on_cycles;
                let names: Vec<String> = (0..8).map(|n| n.to_string()).collect();
                let mut g: HashMap<&str, Vec<&str>> =
                    names.iter().map(|n| (n.as_str(), Vec::new())).collect();
                for (from, to) in edges {
                    // Ids 8 and 9 are dependencies on tasks that do not exist.
                    let to = (to % 10) as usize;
                    let to = if to < 8 { names[to].as_str() } else { "missing" };
                    g.get_mut(names[(from % 8) as usize].as_str()).unwrap().push(to);
                }
                let reaches_itself = |start: &str| {
                    let mut seen = std::collections::HashSet::new();
                    let mut todo: Vec<&str> = g[start].clone();
                    while let Some(n) = todo.pop() {
                        if n == start {
                            return true;
                        }
                        if g.contains_key(n) && seen.insert(n) {
                            todo.extend(&g[n]);
                        }
                    }
                    false
                };
                let found = on_cycles(&g);
                names.iter().all(|n| found.contains(n.as_str()) == reaches_itself(n))
            }
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
