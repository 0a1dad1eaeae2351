//! Property tests of plan edits on real files: for random plans and random valid
//! patches, (1) a failure at any one write of `apply` (a torn line where the write
//! was a line) leaves exactly the old plan, also after earlier such failures; (2)
//! then the edit succeeds and the plan read back is the one worked out in memory;
//! (3) the tree stays a tree in which every live task made by a plan appears once
//! and no task node is deleted or unknown, and no dependency points to a deleted
//! or unknown task, nor makes a ring.

use std::collections::BTreeSet;
use std::io;
use std::path::Path;

use quickcheck::{QuickCheck, TestResult};

use super::apply::{self, Change, Files, PlanWrites};
use super::model::PlanState;
use super::patch::{Operation, PlanPatch, Position, TaskFields};
use super::validate;
use crate::Workspace;
use crate::store::plan_fields::PlanFields;
use crate::store::task_file::TaskRecord;
use crate::store::task_store::TaskStore;

/// Choices read from quickcheck's bytes (so cases shrink), then from a generator
/// seeded by them (so short inputs still make varied cases).
struct Choices {
    bytes: Vec<u8>,
    at: usize,
    state: u64,
}

impl Choices {
    fn new(bytes: Vec<u8>) -> Choices {
        let seed = bytes.iter().fold(0x9e37_79b9_7f4a_7c15u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
        });
        Choices {
            bytes,
            at: 0,
            state: seed | 1,
        }
    }

    fn below(&mut self, n: usize) -> usize {
        let value = match self.bytes.get(self.at) {
            Some(byte) => u64::from(*byte),
            None => {
                // xorshift64
                self.state ^= self.state << 13;
                self.state ^= self.state >> 7;
                self.state ^= self.state << 17;
                self.state >> 8
            }
        };
        self.at += 1;
        if n == 0 {
            0
        } else {
            (value % n as u64) as usize
        }
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}

/// Writes through the files, failing at write number `fail_at` (0-based); a
/// failing line write first writes part of the line, as a crash mid-write would.
struct Failing {
    fail_at: usize,
    done: usize,
}

impl Failing {
    fn turn(&mut self, path: &Path, line: &[u8], create: bool) -> io::Result<bool> {
        let now = self.done;
        self.done += 1;
        if now != self.fail_at {
            return Ok(true);
        }
        if !line.is_empty() {
            use std::io::Write;
            let torn = &line[..line.len() / 2];
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .create(create)
                .open(path)?;
            file.write_all(torn)?;
        }
        Err(io::Error::other("injected failure"))
    }
}

impl PlanWrites for Failing {
    fn create(&mut self, path: &Path, line: &[u8]) -> io::Result<()> {
        self.turn(path, line, true)?;
        Files.create(path, line)
    }

    fn append(&mut self, path: &Path, line: &[u8]) -> io::Result<()> {
        self.turn(path, line, false)?;
        Files.append(path, line)
    }

    fn replace(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.turn(path, &[], false)?;
        Files.replace(path, bytes)
    }
}

/// A random operation on `state` (ids of the tasks a patch made so far are their
/// temp ids: `temps`); many are invalid, and are dropped by the caller.
fn operation(
    c: &mut Choices,
    state: &PlanState,
    temps: &[(String, String)],
    n: usize,
) -> Operation {
    let name = |id: &String| {
        temps
            .iter()
            .find(|(_, real)| real == id)
            .map_or(id.clone(), |(temp, _)| temp.clone())
    };
    let tasks: Vec<String> = state
        .tasks
        .iter()
        .filter(|(_, t)| !t.deleted)
        .map(|(id, _)| name(id))
        .collect();
    let nodes: Vec<String> = state.wbs.nodes.keys().map(name).collect();
    let some = |c: &mut Choices, from: &[String]| -> Vec<String> {
        (0..c.below(3))
            .filter_map(|_| c.pick(from).cloned())
            .collect()
    };
    let position = |c: &mut Choices| match c.below(4) {
        0 => None,
        1 => Some(Position::Index(c.below(4))),
        2 => c.pick(&nodes).cloned().map(Position::Before),
        _ => c.pick(&nodes).cloned().map(Position::After),
    };
    let task = |c: &mut Choices| c.pick(&tasks).cloned().unwrap_or_default();
    match c.below(5) {
        0 | 1 => Operation::Create {
            temp_id: format!("n{n}"),
            fields: TaskFields {
                title: Some(format!("Task {n}")),
                plan: PlanFields {
                    depends_on: Some(some(c, &tasks)),
                    phase: ["A", "B", "C"].get(c.below(4)).map(|p| p.to_string()),
                    acceptance_criteria: Some(vec![format!("criterion {n}")]),
                    ..PlanFields::default()
                },
            },
            parent_id: if c.below(3) == 0 {
                c.pick(&nodes).cloned()
            } else {
                None
            },
            position: position(c),
        },
        2 => Operation::Update {
            task_id: task(c),
            fields: TaskFields {
                title: (c.below(2) == 0).then(|| format!("Renamed {n}")),
                plan: PlanFields {
                    depends_on: Some(some(c, &tasks)),
                    ..PlanFields::default()
                },
            },
        },
        3 => Operation::Move {
            task_id: task(c),
            parent_id: c.pick(&nodes).cloned(),
            position: position(c),
        },
        _ => Operation::Delete {
            task_id: task(c),
            cascade: c.below(2) == 0,
        },
    }
}

/// A random valid patch of up to `max` operations on `state`.
fn valid_patch(c: &mut Choices, state: &PlanState, max: usize) -> PlanPatch {
    let mut patch = PlanPatch {
        understanding: "random".into(),
        operations: Vec::new(),
        potential_conflicts: Vec::new(),
    };
    let mut current = state.clone();
    let mut temps: Vec<(String, String)> = Vec::new();
    for n in 0..max * 3 {
        if patch.operations.len() == max {
            break;
        }
        patch.operations.push(operation(c, &current, &temps, n));
        match validate::plan(&patch, state, "now") {
            Ok(edit) => {
                temps = edit
                    .steps
                    .iter()
                    .filter_map(|s| match s {
                        super::edit::Step::Create {
                            task_id, temp_id, ..
                        } => Some((temp_id.clone(), task_id.clone())),
                        _ => None,
                    })
                    .collect();
                current = edit.state;
            }
            Err(_) => {
                patch.operations.pop();
            }
        }
    }
    patch
}

/// The plan's invariants; `planned` are the tasks plan edits made.
fn check_invariants(state: &PlanState, planned: &BTreeSet<String>) -> Result<(), String> {
    state.wbs.check().map_err(|e| e.to_string())?;
    let in_tree = state.wbs.task_ids();
    for id in &in_tree {
        if state.live(id).is_none() {
            return Err(format!("the tree holds {id}, which is deleted or unknown"));
        }
    }
    for id in planned {
        if state.live(id).is_some() && !in_tree.contains(id.as_str()) {
            return Err(format!("planned task {id} is not in the tree"));
        }
    }
    for (id, task) in state.tasks.iter().filter(|(_, t)| !t.deleted) {
        for dep in task.record.plan.depends_on.iter().flatten() {
            if state.live(dep).is_none() {
                return Err(format!(
                    "{id} depends on {dep}, which is deleted or unknown"
                ));
            }
        }
    }
    match state.dependency_cycle() {
        Some(ring) => Err(format!("dependency ring {ring:?}")),
        None => Ok(()),
    }
}

/// The plan of `ws` and the edits that did not commit.
fn load(ws: &Workspace) -> (PlanState, BTreeSet<String>) {
    let loaded = PlanState::load(ws).unwrap();
    (loaded.state, loaded.uncommitted)
}

fn scenario(bytes: Vec<u8>) -> TestResult {
    let mut c = Choices::new(bytes);
    let (ws, base) = crate::store::workspace::scratch("plan-prop");
    let result = run_scenario(&mut c, &ws);
    std::fs::remove_dir_all(&base).unwrap();
    match result {
        Ok(()) => TestResult::passed(),
        Err(e) => TestResult::error(e),
    }
}

fn run_scenario(c: &mut Choices, ws: &Workspace) -> Result<(), String> {
    // A task made outside any plan.
    for n in 0..c.below(3) {
        let mut record: TaskRecord = crate::store::task_file::tests::record(&format!("user-{n}"));
        record.workspace_id = ws.id.clone();
        TaskStore::new(ws)
            .create(&record)
            .map_err(|e| e.to_string())?;
    }
    let mut planned = BTreeSet::new();
    // A first plan, written for real.
    let (empty, _) = load(ws);
    let size = 1 + c.below(8);
    let first = valid_patch(c, &empty, size);
    let edit = validate::plan(&first, &empty, "t0").map_err(|e| format!("{e:?}"))?;
    let change = Change::between(&empty, &edit.state);
    planned.extend(change.created.iter().map(|r| r.id.clone()));
    apply::apply(
        ws,
        &empty.wbs,
        &change,
        &BTreeSet::new(),
        "p-first",
        "x",
        &mut Files,
    )
    .map_err(|e| e.to_string())?;
    let (old, _) = load(ws);
    check_invariants(&old, &planned)?;

    // A random valid patch, failing at each of its writes in turn.
    let size = 1 + c.below(10);
    let patch = valid_patch(c, &old, size);
    let mut fail_at = 0;
    loop {
        let (now, uncommitted) = load(ws);
        if now != old {
            return Err(format!(
                "after a failure at write {}, the plan changed",
                fail_at - 1
            ));
        }
        let edit = validate::plan(&patch, &now, "t1").map_err(|e| format!("{e:?}"))?;
        let change = Change::between(&now, &edit.state);
        let writes = change.created.len() + change.updated.len() + change.deleted.len() + 1;
        if change.is_empty(&now.wbs) || fail_at == writes {
            // Every write has failed once; now for real.
            if !change.is_empty(&now.wbs) {
                let committed = apply::apply(
                    ws,
                    &now.wbs,
                    &change,
                    &uncommitted,
                    &format!("p-ok{fail_at}"),
                    "x",
                    &mut Files,
                )
                .map_err(|e| e.to_string())?;
                if committed.revision != old.wbs.revision + 1 {
                    return Err(format!(
                        "revision {} after {}",
                        committed.revision, old.wbs.revision
                    ));
                }
            }
            planned.extend(change.created.iter().map(|r| r.id.clone()));
            let (after, left) = load(ws);
            let mut expected = edit.state.clone();
            expected.wbs.revision = after.wbs.revision;
            expected.wbs.aborted = after.wbs.aborted.clone();
            if after != expected {
                return Err(format!("read back {after:#?}\nworked out {expected:#?}"));
            }
            // Failed edits that left whole lines are aborted for good; nothing else is.
            if let Some(e) = after.wbs.aborted.iter().find(|e| !e.starts_with("p-fail")) {
                return Err(format!("{e} is listed aborted"));
            }
            if let Some(e) = left.iter().find(|e| !after.wbs.aborted.contains(*e)) {
                return Err(format!("{e} did not commit and is not listed aborted"));
            }
            return check_invariants(&after, &planned);
        }
        let mut failing = Failing { fail_at, done: 0 };
        let edit_id = format!("p-fail{fail_at}");
        if apply::apply(
            ws,
            &now.wbs,
            &change,
            &uncommitted,
            &edit_id,
            "x",
            &mut failing,
        )
        .is_ok()
        {
            return Err(format!("write {fail_at} of {writes} did not fail"));
        }
        fail_at += 1;
    }
}

#[test]
fn random_patches_apply_all_or_nothing_and_keep_the_plan_sound() {
    QuickCheck::new()
        .tests(150)
        .quickcheck(scenario as fn(Vec<u8>) -> TestResult);
}
