//! Whether a named volume on the daemon's host is the one we mean: its labels say
//! whose it is, and a volume of that name whose labels say otherwise (made by
//! someone else, by an older agent-runner, for another repository or task) is
//! refused, never mounted. The worker's session volume (`session_volume.rs`) and
//! the caches (`docker.rs`, for `worker::caches`) both go through `check`.

use std::time::Duration;

use super::BackendError;
use super::daemon::call;
use agent_runner_core::interrupt::Interrupt;

/// Short docker calls.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The values of labels `keys` of volume `name` (empty for a label it does not
/// have); None: there is no such volume.
pub(crate) fn read(
    name: &str,
    keys: &[&str],
    interrupt: Interrupt,
) -> Result<Option<Vec<String>>, BackendError> {
    // `index .Labels` both engines know (SPEC §24); `json` keeps a value with a tab
    // or a line break in one field.
    let format = keys
        .iter()
        .map(|key| format!("{{{{json (index .Labels \"{key}\")}}}}"))
        .collect::<Vec<_>>()
        .join("\t");
    let out = call(
        &["volume", "inspect", "--format", &format, name],
        CALL_TIMEOUT,
        interrupt,
    )?;
    if !out.ok {
        return Ok(None);
    }
    let line = out.stdout.trim_end_matches('\n');
    let mut values: Vec<String> = line
        .split('\t')
        .map(|field| serde_json::from_str::<Option<String>>(field).ok().flatten())
        .map(Option::unwrap_or_default)
        .collect();
    values.resize(keys.len(), String::new());
    Ok(Some(values))
}

/// Refuses volume `name` unless each of its `expected` labels has the expected
/// value; `whose` says in words what it must be (`the worker session of task x`).
pub(crate) fn check(
    name: &str,
    expected: &[(String, String)],
    whose: &str,
    interrupt: Interrupt,
) -> Result<(), BackendError> {
    let keys: Vec<&str> = expected.iter().map(|(key, _)| key.as_str()).collect();
    match read(name, &keys, interrupt)? {
        Some(values)
            if values
                .iter()
                .zip(expected)
                .all(|(got, (_, want))| got == want) =>
        {
            Ok(())
        }
        Some(values) => {
            let said: Vec<String> = keys
                .iter()
                .zip(&values)
                .map(|(key, value)| format!("{key}={value:?}"))
                .collect();
            Err(BackendError::Refused(format!(
                "the volume {name} on the sandbox's host is not {whose} (its labels say {}): it is not mounted; remove it (`docker volume rm {name}`) if it is not needed",
                agent_runner_core::text::escape_controls(&said.join(", "))
            )))
        }
        None => Err(BackendError::Io(format!(
            "the volume {name} is gone just after it was made"
        ))),
    }
}
