//! The Task Note as HTML. A note quotes the PRD, Meta, the worker and the tests, all
//! outside text, so the renderer treats the Markdown as hostile:
//! - raw HTML never passes through: it is shown as text (`<script>`, `<img
//!   onerror>`), except the note's own folding, whole lines that are exactly
//!   `<details>`, `</details>` or `<summary>text</summary>`, kept balanced;
//! - a link keeps its target only if it is relative or `http:`, `https:` or `mailto:`
//!   (so no `javascript:` or `data:` URL, however it is spelled or encoded); otherwise
//!   only its text remains;
//! - images are shown as their alt text (nothing is fetched);
//! - tables are not rendered (their text shows as is): the note writes none of its
//!   own, and GFM fills a table's short rows with empty cells, so a few KiB of table
//!   in quoted text (a wide header, many one-cell rows) would become megabytes of
//!   HTML and parser memory on every view.
//!
//! Text and attributes are escaped by pulldown-cmark's HTML writer.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};

use super::html;

/// `markdown` as safe HTML.
pub(crate) fn to_html(markdown: &str) -> String {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut filter = Filter::default();
    let events = Parser::new_ext(markdown, options).filter_map(|event| filter.event(event));
    let mut out = String::with_capacity(markdown.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut out, events);
    for _ in 0..filter.open_details {
        out.push_str("</details>\n");
    }
    out
}

/// Rewrites the parser's events; see the module documentation.
#[derive(Default)]
struct Filter {
    /// `<details>` opened by the note and not yet closed.
    open_details: usize,
    /// For each link open: whether its target was kept.
    links: Vec<bool>,
}

impl Filter {
    fn event<'a>(&mut self, event: Event<'a>) -> Option<Event<'a>> {
        match event {
            Event::Html(raw) | Event::InlineHtml(raw) => {
                Some(Event::Html(self.raw_html(&raw).into()))
            }
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => {
                let keep = safe_url(&dest_url);
                self.links.push(keep);
                keep.then_some(Event::Start(Tag::Link {
                    link_type,
                    dest_url,
                    title,
                    id,
                }))
            }
            Event::End(TagEnd::Link) => self
                .links
                .pop()
                .unwrap_or(false)
                .then_some(Event::End(TagEnd::Link)),
            Event::Start(Tag::Image { .. }) | Event::End(TagEnd::Image) => None,
            Event::InlineMath(s) | Event::DisplayMath(s) => Some(Event::Text(s)),
            Event::FootnoteReference(s) => Some(Event::Text(CowStr::from(format!("[^{s}]")))),
            other => Some(other),
        }
    }

    /// Raw HTML from the note, line by line: the note's own folding kept, all else
    /// escaped as text.
    fn raw_html(&mut self, raw: &str) -> String {
        let mut out = String::with_capacity(raw.len() + 16);
        for line in raw.split_inclusive('\n') {
            let tag = line.trim();
            if tag == "<details>" {
                self.open_details += 1;
                out.push_str("<details>\n");
            } else if tag == "</details>" && self.open_details > 0 {
                self.open_details -= 1;
                out.push_str("</details>\n");
            } else if let Some(summary) = tag
                .strip_prefix("<summary>")
                .and_then(|t| t.strip_suffix("</summary>"))
                .filter(|t| self.open_details > 0 && !t.contains(['<', '>']))
            {
                out.push_str("<summary>");
                html::push_text(&mut out, summary);
                out.push_str("</summary>\n");
            } else {
                html::push_text(&mut out, line);
            }
        }
        out
    }
}

/// Whether a link target may stay: relative, or `http:`, `https:`, `mailto:`.
/// Browsers ignore ASCII tabs, newlines and leading spaces or controls in a URL, so
/// they are dropped before the scheme is read (`java\tscript:`).
pub(crate) fn safe_url(url: &str) -> bool {
    let cleaned: String = url
        .chars()
        .filter(|c| !c.is_ascii_whitespace() && !c.is_control())
        .collect::<String>()
        .to_ascii_lowercase();
    match cleaned.find([':', '/', '?', '#', '\\']) {
        Some(at) if cleaned.as_bytes()[at] == b':' => {
            matches!(&cleaned[..at], "http" | "https" | "mailto")
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_is_text() {
        let html = to_html(
            "# Note\n\n<script>alert(1)</script>\n\nText <img src=x onerror=alert(1)> and <b>bold</b>\n\n<div onclick=\"x()\">block</div>\n",
        );
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(!html.contains("<div"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{html}"
        );
        assert!(html.contains("<h1>Note</h1>"), "{html}");
    }

    #[test]
    fn the_notes_folding_is_kept_balanced_and_nothing_else() {
        let html =
            to_html("<details>\n<summary>PRD (full text)</summary>\n\n```\nx\n```\n\n</details>\n");
        assert_eq!(
            html,
            "<details>\n<summary>PRD (full text)</summary>\n<pre><code>x\n</code></pre>\n</details>\n"
        );
        let html = to_html("</details>\n\n<details>\n<summary><img src=x onerror=y></summary>\n");
        assert!(!html.contains("<img"), "{html}");
        assert_eq!(html.matches("<details>").count(), 1, "{html}");
        assert_eq!(
            html.matches("</details>").count(),
            1,
            "closed at the end: {html}"
        );
        let html = to_html("<summary>outside</summary>\n\n<details open ontoggle=alert(1)>\n");
        assert!(
            !html.contains("<summary>") && !html.contains("<details"),
            "{html}"
        );
    }

    #[test]
    fn only_safe_links_keep_their_targets() {
        for bad in [
            "[x](javascript:alert(1))",
            "[x](JaVaScRiPt:alert(1))",
            "[x](java\tscript:alert(1))",
            "[x]( javascript:alert(1))",
            "[x](javascript&colon;alert(1))",
            "[x](&#x6A;avascript:alert(1))",
            "[x](data:text/html,<script>alert(1)</script>)",
            "[x](vbscript:msgbox)",
            "<javascript:alert(1)>",
            "[x][r]\n\n[r]: javascript:alert(1)",
        ] {
            let html = to_html(bad);
            assert!(!html.contains("href"), "{bad}: {html}");
            assert!(!html.contains("<a"), "{bad}: {html}");
        }
        assert_eq!(
            to_html("[x](https://example.com/a?b=1) [y](#s) [z](/logs/run-1.log) <mailto:a@b.c>"),
            "<p><a href=\"https://example.com/a?b=1\">x</a> <a href=\"#s\">y</a> <a href=\"/logs/run-1.log\">z</a> <a href=\"mailto:a@b.c\">mailto:a@b.c</a></p>\n"
        );
        assert_eq!(to_html("![alt text](https://x/y.png)"), "<p>alt text</p>\n");
        assert!(safe_url("relative/path:with-colon"));
        assert!(!safe_url("\u{1}javascript:x"));
    }

    /// Pieces of hostile Markdown a note could quote, to build cases from.
    const PIECES: [&str; 32] = [
        "[x](",
        "]",
        "(",
        ")",
        "](",
        "<",
        ">",
        "javascript:",
        "JaVa\tScRiPt:",
        "data:x,",
        "http://x",
        "&#106;avascript:",
        "\n",
        "\n\n",
        "<details>\n",
        "</details>\n",
        "<summary>s</summary>\n",
        "<script>",
        "<img src=x onerror=y>",
        "`",
        "```\n",
        "*",
        "!",
        "[r]: ",
        "    ",
        "> ",
        "- ",
        "1. ",
        "|",
        "#",
        "\\",
        "<a href=\"javascript:x\">",
    ];

    /// The tag name in `html` that starts at `at` (just after `<` or `</`).
    fn tag_name(html: &str, at: usize) -> &str {
        let rest = &html[at..];
        let end = rest
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(rest.len());
        &rest[..end]
    }

    /// Whether an attribute value has no scheme (letters, digits, `+`, `-` and `.`
    /// before a `:`) or a safe one.
    fn safe_target(target: &str) -> bool {
        let end = target
            .find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
            .unwrap_or(target.len());
        !target[end..].starts_with(':')
            || ["http", "https", "mailto"].contains(&target[..end].to_ascii_lowercase().as_str())
    }

    #[test]
    fn hostile_markdown_gives_only_known_tags_and_safe_links() {
        // More cases than the default: a link needs a few pieces in a row.
        quickcheck::QuickCheck::new()
            .tests(1000)
            .quickcheck(only_known_tags_and_safe_links as fn(Vec<u8>, Vec<String>) -> bool);
    }

    fn only_known_tags_and_safe_links(picks: Vec<u8>, words: Vec<String>) -> bool {
        let mut markdown = String::new();
        for (i, pick) in picks.iter().enumerate() {
            match PIECES.get(usize::from(*pick) % (PIECES.len() + 4)) {
                Some(piece) => markdown.push_str(piece),
                None => markdown.push_str(words.get(i % words.len().max(1)).map_or("", |w| w)),
            }
        }
        let html = to_html(&markdown);
        let known: Vec<&str> = "p h1 h2 h3 h4 h5 h6 ul ol li code pre em strong del a \
             blockquote hr br input details summary"
            .split_whitespace()
            .collect();
        // Text has its `<` escaped: every `<` left opens a tag the renderer wrote.
        let tags_safe = html.match_indices('<').all(|(at, _)| {
            let tag = &html[at..html[at..].find('>').map_or(html.len(), |end| at + end)];
            let name = tag_name(&html, at + 1 + usize::from(tag.starts_with("</")));
            known.contains(&name)
                && tag
                    .find("href=\"")
                    .is_none_or(|h| safe_target(&tag[h + 6..]))
        });
        tags_safe && html.matches("<details>").count() == html.matches("</details>").count()
    }

    #[test]
    fn task_lists_and_code_render_and_tables_stay_text() {
        let html = to_html("- [x] AC-1: done\n- [ ] AC-2\n\n| a | b |\n|---|---|\n| 1 | `<2>` |\n");
        assert!(html.contains("checked=\"\""), "{html}");
        assert!(!html.contains("<table>"), "{html}");
        assert!(html.contains("| 1 | <code>&lt;2&gt;</code> |"), "{html}");
    }
}
