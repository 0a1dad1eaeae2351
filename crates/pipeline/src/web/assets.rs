//! The script and style sheet, embedded in the binary: no files to install, no
//! build step. The Content-Security-Policy allows scripts and styles from these
//! URLs only (no inline script), so this is all the code a page runs.

use super::http::Response;
use super::pages;

const APP_JS: &str = include_str!("static/app.js");
const STYLE_CSS: &str = include_str!("static/style.css");

/// `/static/<name>`.
pub(crate) fn get(name: &str) -> Response {
    match name {
        "app.js" => Response::new(200, "text/javascript; charset=utf-8", APP_JS),
        "style.css" => Response::new(200, "text/css; charset=utf-8", STYLE_CSS),
        _ => pages::error(404, &format!("no static file {name}")),
    }
}
