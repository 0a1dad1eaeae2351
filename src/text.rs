//! Shortening and cleaning text for people: cuts on character boundaries, one-line
//! forms, and terminal-safe escaping of control characters. Text that may hold a
//! secret must be masked *before* it is cut (SPEC §10), so no prefix survives.

/// Marks where text was cut.
pub const ELLIPSIS: &str = "…";

/// The first `max` bytes of `s` (on a char boundary), marked when cut.
pub fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ELLIPSIS}", &s[..end])
}

/// The last `max` bytes of `s` (on a char boundary), marked when cut.
pub fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("{ELLIPSIS}{}", &s[start..])
}

/// The first `max` characters of `s`, marked when cut.
pub fn cut_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}{ELLIPSIS}", &s[..at]),
        None => s.to_string(),
    }
}

/// All whitespace runs (newlines included) collapsed to one space.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first non-blank line, trimmed and cut to `max` bytes.
pub fn first_line(s: &str, max: usize) -> String {
    cut(
        s.lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim(),
        max,
    )
}

/// `s` with every control character shown as an escape (`\e`, `\n`, `\x07`,
/// `\u{9b}`), so outside text (worker output, API errors) can neither steer a
/// terminal (ANSI/OSC sequences) nor break a line. Tabs stay.
pub fn escape_controls(s: &str) -> String {
    if !s.chars().any(needs_escape) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !needs_escape(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{1b}' => out.push_str("\\e"),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    out
}

fn needs_escape(c: char) -> bool {
    // C0, DEL, C1, and the Unicode line/paragraph separators and bidi overrides
    // that reorder or break what a terminal shows.
    (c.is_control() && c != '\t')
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_respect_char_boundaries() {
        assert_eq!(cut("héllo", 2), "h…");
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(tail("héllo", 4), "…llo");
        assert_eq!(cut_chars("héllo", 2), "hé…");
    }

    #[test]
    fn one_line_forms() {
        assert_eq!(one_line(" a\n b\t c "), "a b c");
        assert_eq!(first_line("\n  \n first \nsecond", 3), "fir…");
    }

    #[test]
    fn controls_are_shown_not_obeyed() {
        assert_eq!(
            escape_controls("red \u{1b}[31mX\u{1b}]0;title\u{7} a\nb\u{9b}\tc"),
            "red \\e[31mX\\e]0;title\\x07 a\\nb\\x9b\tc"
        );
        assert_eq!(escape_controls("plain"), "plain");
        assert_eq!(escape_controls("\u{202e}txt"), "\\u{202e}txt");
    }
}
