//! Which handler answers a request (from a connection whose user the server has
//! checked as it accepted it): the Host check first (every request), the path
//! decoded segment by segment (a segment that decodes to `..`, `.`, or holds a `/`
//! or NUL is refused, however it was encoded), then the method: GET only reads,
//! POST (state changes) passes the Origin, token and content-type checks first.

use std::net::SocketAddr;

use super::api;
use super::app::App;
use super::assets;
use super::http::{Request, Response};
use super::pages;

/// The response to `request`, which came to our `local` address.
pub(crate) fn handle(app: &App, request: &Request, local: SocketAddr) -> Response {
    let api = request.path.starts_with("/api/");
    let fail = |status: u16, message: &str| {
        if api {
            api::error(status, message)
        } else {
            pages::error(status, message)
        }
    };
    if let Err(denied) = app.guard.check_host(request, local) {
        let (status, message) = denied.status();
        return fail(status, &message);
    }
    let segments = match segments(&request.path) {
        Ok(segments) => segments,
        Err(why) => return fail(400, &why.to_string()),
    };
    let path: Vec<&str> = segments.iter().map(String::as_str).collect();
    let method = request.method.as_str();
    let allowed = allowed_methods(&path);
    if allowed.is_empty() {
        return fail(404, &format!("nothing at {}", request.path));
    }
    if !allowed.contains(&method) {
        return fail(405, &format!("{method} is not allowed here"))
            .with("Allow", allowed.join(", "));
    }
    if method == "POST"
        && let Err(denied) = app.guard.check_change(request)
    {
        let (status, message) = denied.status();
        return fail(status, &message);
    }
    match (method, path.as_slice()) {
        ("GET", []) => pages::index(app, request.query_param("all") == Some("1")),
        ("GET", ["plan"]) => pages::plan(app),
        ("GET", ["evals"]) => pages::evals(app),
        ("GET", ["tasks", id]) => pages::task(app, id),
        ("GET", ["tasks", id, "attempts", job, "files", name]) => {
            pages::attempt_file(app, id, job, name)
        }
        ("GET", ["static", name]) => assets::get(name),
        ("GET", ["api", "tasks"]) => api::tasks(app, request),
        ("POST", ["api", "tasks"]) => api::create_task(app, request),
        ("GET", ["api", "tasks", id]) => api::task(app, id),
        ("GET", ["api", "tasks", id, "attempts"]) => api::attempts(app, id),
        ("GET", ["api", "tasks", id, "events"]) => api::events(app, id, request),
        ("POST", ["api", "tasks", id, "run"]) => api::run_task(app, id),
        ("POST", ["api", "tasks", id, "stop"]) => api::stop_task(app, id),
        ("POST", ["api", "tasks", id, "continue"]) => api::continue_task(app, id, request),
        ("POST", ["api", "tasks", id, "approve"]) => api::approve_task(app, id),
        ("POST", ["api", "tasks", id, "reject"]) => api::reject_task(app, id, request),
        ("GET", ["api", "plan"]) => api::plan(app),
        ("POST", ["api", "plan"]) => api::start_plan(app, request),
        ("GET", ["api", "plan", "runs", run]) => api::plan_run(app, run),
        ("GET", ["api", "orchestrator"]) => api::orchestrator(app),
        ("POST", ["api", "orchestrator", "start"]) => api::start_orchestrator(app),
        _ => fail(404, &format!("nothing at {}", request.path)),
    }
}

/// The methods a path answers to; empty if it is no route.
fn allowed_methods(path: &[&str]) -> &'static [&'static str] {
    match path {
        []
        | ["plan"]
        | ["evals"]
        | ["tasks", _]
        | ["tasks", _, "attempts", _, "files", _]
        | ["static", _] => &["GET"],
        ["api", "tasks"] | ["api", "plan"] => &["GET", "POST"],
        ["api", "tasks", _]
        | ["api", "tasks", _, "attempts" | "events"]
        | ["api", "plan", "runs", _] => &["GET"],
        ["api", "orchestrator"] => &["GET"],
        [
            "api",
            "tasks",
            _,
            "run" | "stop" | "continue" | "approve" | "reject",
        ]
        | ["api", "orchestrator", "start"] => &["POST"],
        _ => &[],
    }
}

/// Why a request's path is refused (400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadPath {
    #[error("the path does not start with /")]
    NotAbsolute,
    #[error("{0:?}: not valid percent-encoded UTF-8")]
    Undecodable(String),
    #[error("an empty path segment")]
    EmptySegment,
    #[error("{0:?}: not a plain name")]
    NotPlain(String),
}

/// The path's segments, percent-decoded; an error for a segment that is not a
/// plain name once decoded.
pub(crate) fn segments(path: &str) -> Result<Vec<String>, BadPath> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(BadPath::NotAbsolute);
    };
    if rest.is_empty() {
        return Ok(Vec::new());
    }
    rest.split('/')
        .map(|raw| {
            let decoded = decode(raw).ok_or_else(|| BadPath::Undecodable(raw.to_string()))?;
            if decoded.is_empty() && raw.is_empty() {
                return Err(BadPath::EmptySegment);
            }
            if decoded == "." || decoded == ".." || decoded.contains(['/', '\\', '\0']) {
                return Err(BadPath::NotPlain(raw.to_string()));
            }
            Ok(decoded)
        })
        .collect()
}

/// Percent-decodes one segment; None if an escape is broken or the result is not
/// UTF-8. (`percent_decode` keeps a broken escape as text; here it is refused.)
fn decode(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let broken = bytes.iter().enumerate().any(|(i, &b)| {
        b == b'%'
            && !bytes
                .get(i + 1..i + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
    });
    if broken {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .ok()?;
    Some(decoded.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_decode_to_plain_names_only() {
        assert_eq!(segments("/").unwrap(), Vec::<String>::new());
        assert_eq!(segments("/tasks/t-1").unwrap(), ["tasks", "t-1"]);
        assert_eq!(segments("/a%20b/%E3%82%A2").unwrap(), ["a b", "ア"]);
        for bad in [
            "/tasks/..",
            "/tasks/%2e%2e",
            "/tasks/%2E.",
            "/tasks/.",
            "/tasks/a%2fb",
            "/tasks/a%5cb",
            "/tasks/a%00",
            "/tasks/%zz",
            "/tasks/%+1",
            "/tasks/%e3%82",
            "/tasks/%",
            "/tasks//x",
            "/tasks/",
            "tasks",
        ] {
            assert!(segments(bad).is_err(), "{bad}");
        }
    }

    quickcheck::quickcheck! {
        fn decoded_segments_are_plain_names(bytes: Vec<u8>) -> bool {
            // Each byte picks a piece: separators, dots, escapes of the bytes that
            // matter (`.`, `/`, `\\`, NUL, parts of a UTF-8 `ア`), broken escapes and
            // plain text.
            const PIECES: [&str; 14] = [
                "/", ".", "a", "ア", "%", "%2e", "%2E", "%2f", "%5c", "%00", "%e3", "%82",
                "%a2", "%zz",
            ];
            let mut path = String::from("/");
            for b in bytes {
                path.push_str(PIECES[usize::from(b) % PIECES.len()]);
            }
            let plain = |names: Vec<String>| {
                names.iter().all(|n| {
                    !n.is_empty() && n != "." && n != ".." && !n.contains(['/', '\\', '\0'])
                })
            };
            // Each segment alone too: in a long path, one bad segment hides the rest.
            std::iter::once(path.clone())
                .chain(path.split('/').skip(1).map(|raw| format!("/{raw}")))
                .all(|p| segments(&p).map_or(true, plain))
        }
    }

    #[test]
    fn every_route_has_its_methods() {
        assert_eq!(allowed_methods(&["api", "tasks"]), ["GET", "POST"]);
        assert_eq!(allowed_methods(&["api", "tasks", "t", "run"]), ["POST"]);
        assert_eq!(allowed_methods(&["api", "tasks", "t", "stop"]), ["POST"]);
        assert_eq!(allowed_methods(&["api", "tasks", "t", "approve"]), ["POST"]);
        assert_eq!(allowed_methods(&["api", "tasks", "t", "reject"]), ["POST"]);
        assert_eq!(allowed_methods(&["tasks", "t"]), ["GET"]);
        assert!(allowed_methods(&["etc", "passwd"]).is_empty());
    }
}
