//! Markdown that outside text cannot break (SPEC §10), and that carries no control
//! character from it (the note is read with `cat` too). The Task Note embeds text
//! from the PRD, Meta, the worker and the tests; any of it may hold an unbalanced
//! ``` fence, a `</details>`, a heading or a newline where one line was expected,
//! and would then swallow or duplicate the sections after it. Every piece of outside
//! text goes through one of these:
//! - `inline`: one line, every character that could start Markdown or HTML
//!   backslash-escaped (renders as the same text);
//! - `code_span`: one line as inline code, delimited by more backticks than it holds;
//! - `quote`: several lines as a blockquote of escaped lines;
//! - `fence`: a fenced block whose fence is longer than any backtick run inside, so
//!   nothing inside can close it (also inside `<details>`: a fenced block's content
//!   is never HTML).

use std::fmt::Write as _;

use crate::text::{escape_controls, escape_controls_in_lines, one_line};

/// Characters escaped in inline text: HTML (`<`, `&`: an inline `</details>` would
/// close the block around it), code spans, links and the escape character itself.
/// Emphasis characters other than `*` are left alone: `_` never emphasises inside a
/// word (`max_loops`), and emphasis cannot break the note's structure anyway.
const SPECIAL: &[char] = &['\\', '`', '*', '[', ']', '<', '>', '&', '#'];

/// `text` on one line with Markdown and HTML characters escaped.
pub fn inline(text: &str) -> String {
    let line = escape_controls(&one_line(text));
    let mut out = String::with_capacity(line.len() + 8);
    for c in line.chars() {
        if SPECIAL.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `text` on one line as inline code.
pub fn code_span(text: &str) -> String {
    let line = escape_controls(&one_line(text));
    let ticks = "`".repeat(longest_run(&line, '`') + 1);
    // A space keeps a leading or trailing backtick from joining the delimiter.
    let pad = if line.starts_with('`') || line.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{line}{pad}{ticks}")
}

/// `text` as a blockquote, each line escaped.
pub fn quote(text: &str) -> String {
    let mut out = String::new();
    for line in text.trim_end().lines() {
        let line = inline(line);
        if line.is_empty() {
            out.push_str(">\n");
        } else {
            let _ = writeln!(out, "> {line}");
        }
    }
    if out.is_empty() {
        out.push_str(">\n");
    }
    out
}

/// `text` as a fenced block (with a blank line after it).
pub fn fence(lang: &str, text: &str) -> String {
    let text = escape_controls_in_lines(text);
    let ticks = "`".repeat(longest_run(&text, '`').max(2) + 1);
    let body = text.trim_end_matches('\n');
    format!("{ticks}{lang}\n{body}\n{ticks}\n\n")
}

fn longest_run(text: &str, c: char) -> usize {
    text.split(|x| x != c).map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_text_cannot_start_markdown_or_html() {
        assert_eq!(
            inline("a <details> `x` *b*\n# c"),
            "a \\<details\\> \\`x\\` \\*b\\* \\# c"
        );
        assert_eq!(
            inline("plain AC-1: max_loops ok."),
            "plain AC-1: max_loops ok."
        );
    }

    #[test]
    fn code_spans_outgrow_backticks_inside() {
        assert_eq!(code_span("npm test"), "`npm test`");
        assert_eq!(code_span("echo `date`"), "`` echo `date` ``");
        assert_eq!(code_span("`x"), "`` `x ``");
    }

    #[test]
    fn fences_outgrow_backticks_inside() {
        assert_eq!(
            fence("text", "a ``` b ```` c"),
            "`````text\na ``` b ```` c\n`````\n\n"
        );
    }

    #[test]
    fn quotes_escape_each_line() {
        assert_eq!(
            quote("one\n\n```\n</details>"),
            "> one\n>\n> \\`\\`\\`\n> \\</details\\>\n"
        );
    }
}
