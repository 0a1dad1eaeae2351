//! A webhook notification: the JSON POSTed, signed when the entry names a key,
//! up to 3 tries with a growing pause; no redirect followed (the signed body goes
//! to the URL the user set, nowhere else).

use std::time::Duration;

use super::not_sent::NotSent;
use super::signature;
use agent_runner_core::interrupt::Interrupt;

/// Tries per notification.
const TRIES: u32 = 3;
/// The pause before the second try; doubled before the third.
const FIRST_PAUSE: Duration = Duration::from_millis(500);
/// Time one try may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// `scheme://host[:port]` of `url`, for messages: its path and query can hold the
/// hook's own token.
pub(crate) fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    format!("{scheme}://{host}")
}

/// POSTs `body` to `url`, signed with the key in variable `secret_var` if named.
pub(crate) fn post(
    url: &str,
    secret_var: Option<&str>,
    body: &[u8],
    interrupt: Interrupt,
) -> Result<(), NotSent> {
    let signed = match secret_var {
        Some(var) => match std::env::var(var) {
            Ok(key) if !key.is_empty() => Some(signature::sign(key.as_bytes(), body)),
            _ => return Err(NotSent::NoSecret(var.to_string())),
        },
        None => None,
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(TIMEOUT))
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(concat!("agent-runner/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let mut pause = FIRST_PAUSE;
    let mut last = String::new();
    for attempt in 1..=TRIES {
        if interrupt.is_set() {
            return Err(NotSent::Interrupted);
        }
        let mut request = agent.post(url).header("Content-Type", "application/json");
        if let Some(value) = &signed {
            request = request.header(signature::HEADER, value.as_str());
        }
        match request.send(body) {
            Ok(response) if response.status().is_success() => return Ok(()),
            Ok(response) => last = format!("HTTP {}", response.status().as_u16()),
            Err(e) => last = e.to_string(),
        }
        if attempt < TRIES {
            std::thread::sleep(pause);
            pause *= 2;
        }
    }
    Err(NotSent::Tries { tries: TRIES, last })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_is_named_by_its_origin_only() {
        assert_eq!(
            origin("https://hooks.test/services/T0/B0/secret?x=1"),
            "https://hooks.test"
        );
        assert_eq!(
            origin("http://u:p@127.0.0.2:8080/h"),
            "http://127.0.0.2:8080"
        );
    }
}
