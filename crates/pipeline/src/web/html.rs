//! HTML escaping: every piece of text from outside (task titles, prompts, notes,
//! worker output, errors, file names) goes into a page through `text`, which makes
//! it text in element content and in quoted attribute values alike. Nothing from
//! outside is ever written into a page unescaped, nor into a `<script>` or `<style>`.

/// `s` as HTML text: `&`, `<`, `>`, `"` and `'` escaped; control characters other
/// than newline and tab dropped.
pub(crate) fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    push_text(&mut out, s);
    out
}

/// Appends `s` escaped as by `text`.
pub(crate) fn push_text(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
}

/// A path segment percent-encoded for a URL (ids are already safe; this keeps an
/// odd one from changing the URL's structure).
pub(crate) fn url_segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, SEGMENT).to_string()
}

/// What `url_segment` escapes: all but RFC 3986's unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_becomes_text() {
        assert_eq!(
            text("<script>alert(1)</script> & \"q\" 'a'"),
            "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&quot; &#39;a&#39;"
        );
        assert_eq!(text("a\u{1b}[31mb\u{0}\nc"), "a[31mb\nc");
        assert_eq!(text("TODO アプリ"), "TODO アプリ");
        assert_eq!(url_segment("t-1.a_b~"), "t-1.a_b~");
        assert_eq!(url_segment("../x y"), "..%2Fx%20y");
    }
}
