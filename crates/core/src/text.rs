//! Shortening and cleaning text for people: cuts on character boundaries, one-line
//! forms, and terminal-safe escaping of control characters. Text that may hold a
//! secret must be masked *before* it is cut (SPEC §10), so no prefix survives.

/// Marks where text was cut.
pub const ELLIPSIS: &str = "…";

/// A number of bytes for people (`512 B`, `4.0 MiB`).
pub fn bytes(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}

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

/// Columns `s` takes in a terminal: East Asian wide and fullwidth characters take
/// two, everything else one (a close approximation of wcwidth, for table layout).
pub(crate) fn display_width(s: &str) -> usize {
    s.chars()
        .map(|c| match c as u32 {
            0x1100..=0x115F
            | 0x2E80..=0x303E
            | 0x3041..=0x33FF
            | 0x3400..=0x4DBF
            | 0x4E00..=0x9FFF
            | 0xA000..=0xA4CF
            | 0xAC00..=0xD7A3
            | 0xF900..=0xFAFF
            | 0xFE30..=0xFE4F
            | 0xFF00..=0xFF60
            | 0xFFE0..=0xFFE6
            | 0x1F300..=0x1F64F
            | 0x1F900..=0x1F9FF
            | 0x20000..=0x3FFFD => 2,
            _ => 1,
        })
        .sum()
}

/// `s` cut to at most `width` columns (marked when cut) and padded with spaces to
/// exactly `width`.
pub fn fit(s: &str, width: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    let total = display_width(s);
    for c in s.chars() {
        let w = display_width(c.encode_utf8(&mut [0; 4]));
        let room = if total > width {
            width.saturating_sub(1)
        } else {
            width
        };
        if used + w > room {
            out.push_str(ELLIPSIS);
            used += 1;
            break;
        }
        out.push(c);
        used += w;
    }
    out.push_str(&" ".repeat(width.saturating_sub(used)));
    out
}

/// `escape_controls` line by line: line breaks stay (CRLF becomes LF), every other
/// control character is shown escaped. For multi-line outside text kept as text
/// (outputs in the Task Note, which people `cat`).
pub fn escape_controls_in_lines(s: &str) -> String {
    if !s.chars().any(|c| c != '\n' && needs_escape(c)) {
        return s.to_string();
    }
    s.split('\n')
        .map(|line| escape_controls(line.strip_suffix('\r').unwrap_or(line)))
        .collect::<Vec<_>>()
        .join("\n")
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
    fn table_cells_fit_their_columns() {
        assert_eq!(display_width("TODO アプリ"), 11);
        assert_eq!(fit("abc", 5), "abc  ");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("アプリを作成", 6), "アプ… ");
        assert_eq!(display_width(&fit("アプリを作成して", 7)), 7);
    }

    #[test]
    fn controls_are_shown_not_obeyed() {
        assert_eq!(
            escape_controls("red \u{1b}[31mX\u{1b}]0;title\u{7} a\nb\u{9b}\tc"),
            "red \\e[31mX\\e]0;title\\x07 a\\nb\\x9b\tc"
        );
        assert_eq!(escape_controls("plain"), "plain");
        assert_eq!(escape_controls("\u{202e}txt"), "\\u{202e}txt");
        assert_eq!(
            escape_controls_in_lines("a\r\n\u{1b}[31mb\n\tc"),
            "a\n\\e[31mb\n\tc"
        );
    }
}
