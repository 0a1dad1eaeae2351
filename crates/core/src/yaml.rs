//! YAML from outside (LLM replies, the Task YAML, scripts and defaults), checked
//! before serde_norway builds anything from it. serde_norway reads the whole text into
//! events before it looks at any, and libyaml's cost per token grows with the
//! nesting, so 400 KB of `{a: {a: …` cost minutes; and aliases are expanded on
//! every use, so 50 KB of `[*a, *a, …]` over a list of thousands cost as much. Here
//! libyaml's own event parser (the one serde_norway runs, so nothing is interpreted
//! differently) is walked once, and stopped at the first node nested deeper than
//! `MAX_DEPTH`, at aliases that would expand to more than `MAX_ALIAS_NODES` nodes in
//! all, and, where the rules say so, at the first tag. Each event costs at most
//! `MAX_DEPTH` steps of libyaml's then, so the check and the parse after it take time
//! in proportion to the text.
//!
//! Tags have no use in a reply, and a tagged value hides from checks that look at
//! mappings (`worker: !x {env: …}` is a tagged value, not a mapping); `!!str`-style
//! tags are dropped by serde_norway, so they can only be seen here.

use std::collections::HashMap;
use std::ffi::CStr;
use std::mem::MaybeUninit;

use crate::Error;
use crate::interrupt::Interrupt;

/// Deepest nesting of collections accepted: far more than any document we read
/// needs (a plan patch is 6 deep), far less than where libyaml slows down.
pub(crate) const MAX_DEPTH: usize = 32;
/// Most nodes that aliases may add in all when they are expanded.
pub(crate) const MAX_ALIAS_NODES: u64 = 100_000;
/// Texts up to this size are parsed on the caller's thread: a few milliseconds.
const INLINE_BYTES: usize = 64 << 10;

/// What a text may hold besides plain nesting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rules {
    /// A reply from an LLM: no tags.
    Reply,
    /// A document a person wrote: tags are left to the reader of its shape.
    Document,
}

/// Why a text was refused, and where (1-based, as serde_norway counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at line {} column {}",
            self.message, self.line, self.column
        )
    }
}

/// Checks `text` under `rules`. A YAML syntax error is not a refusal: the check
/// stops there, and serde_norway, which stops at the same place, reports it.
pub fn check(text: &str, rules: Rules) -> Result<(), Refusal> {
    let mut parser = Parser::new(text);
    let mut walk = Walk::default();
    while let Some(event) = parser.next() {
        walk.step(&event, rules)?;
        if event.kind == Kind::End {
            break;
        }
    }
    Ok(())
}

/// A scalar as text, as serde_norway reads it into a string: strings as they are,
/// numbers and booleans as written; `None` for anything else.
pub fn scalar_text(value: &serde_norway::Value) -> Option<String> {
    use serde_norway::Value;
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `text` parsed into a `serde_norway::Value` once `check` has passed it.
pub fn parse(text: &str, rules: Rules) -> Result<serde_norway::Value, Error> {
    check(text, rules).map_err(Error::YamlRefused)?;
    Ok(serde_norway::from_str(text)?)
}

/// `parse`, given up (None) once `interrupt` is set: a long text is parsed on a
/// thread of its own, so that a signal is acted on at once whatever the text holds
/// (an accepted 8 MiB reply can still take seconds).
pub fn parse_unless_stopped(
    text: &str,
    rules: Rules,
    interrupt: Interrupt,
) -> Option<Result<serde_norway::Value, Error>> {
    if text.len() <= INLINE_BYTES {
        return Some(parse(text, rules));
    }
    let text = text.to_string();
    interrupt.unless_stopped("yaml parser", move || parse(&text, rules))
}

/// The counts kept over the events.
#[derive(Default)]
struct Walk {
    /// Open collections, innermost last: the nodes each holds so far (itself
    /// included, aliases expanded) and its anchor.
    open: Vec<(u64, Option<Vec<u8>>)>,
    /// Anchor → nodes of its node, aliases expanded; `None` while the node is open
    /// (an alias inside its own anchor is serde_norway's recursion error, not ours).
    anchors: HashMap<Vec<u8>, Option<u64>>,
    /// Nodes added by aliases so far.
    alias_nodes: u64,
}

impl Walk {
    fn step(&mut self, event: &Event, rules: Rules) -> Result<(), Refusal> {
        let refuse = |message: String| Refusal {
            message,
            line: event.line + 1,
            column: event.column + 1,
        };
        if let (Rules::Reply, Some(tag)) = (rules, &event.tag) {
            return Err(refuse(format!(
                "YAML tag {} refused: write plain values",
                crate::text::escape_controls(&crate::text::cut_chars(
                    &String::from_utf8_lossy(tag),
                    40
                ))
            )));
        }
        let size = match event.kind {
            Kind::Start => {
                if self.open.len() >= MAX_DEPTH {
                    return Err(refuse(format!(
                        "YAML nested deeper than {MAX_DEPTH} levels"
                    )));
                }
                if let Some(anchor) = &event.anchor {
                    self.anchors.insert(anchor.clone(), None);
                }
                self.open.push((1, event.anchor.clone()));
                return Ok(());
            }
            Kind::Close => {
                let Some((size, anchor)) = self.open.pop() else {
                    return Ok(());
                };
                if let Some(anchor) = anchor {
                    self.anchors.insert(anchor, Some(size));
                }
                size
            }
            Kind::Scalar => {
                if let Some(anchor) = &event.anchor {
                    self.anchors.insert(anchor.clone(), Some(1));
                }
                1
            }
            Kind::Alias => {
                let size = event
                    .anchor
                    .as_ref()
                    .and_then(|a| self.anchors.get(a).copied().flatten())
                    .unwrap_or(1);
                self.alias_nodes = self.alias_nodes.saturating_add(size);
                if self.alias_nodes > MAX_ALIAS_NODES {
                    return Err(refuse(format!(
                        "YAML aliases expand to more than {MAX_ALIAS_NODES} nodes; write the values out"
                    )));
                }
                size
            }
            Kind::Other | Kind::End => return Ok(()),
        };
        if let Some((parent, _)) = self.open.last_mut() {
            *parent = parent.saturating_add(size);
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A sequence or mapping starts.
    Start,
    /// It ends.
    Close,
    Scalar,
    Alias,
    /// Stream and document boundaries.
    Other,
    /// The end of the stream.
    End,
}

/// One libyaml event, copied out of libyaml's memory. For an alias, `anchor` is
/// the anchor it names.
struct Event {
    kind: Kind,
    anchor: Option<Vec<u8>>,
    tag: Option<Vec<u8>>,
    line: usize,
    column: usize,
}

/// libyaml's event parser over a borrowed text.
struct Parser<'a> {
    /// Boxed: libyaml keeps a pointer to the parser inside it (its read handler's
    /// data), so it must not move.
    sys: Box<MaybeUninit<unsafe_libyaml_norway::yaml_parser_t>>,
    failed: bool,
    _text: std::marker::PhantomData<&'a str>,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Parser<'a> {
        let mut sys = Box::new(MaybeUninit::<unsafe_libyaml_norway::yaml_parser_t>::uninit());
        // SAFETY: initialize zeroes and sets up the struct (it fails only when
        // out of memory, and a failed one is safe to delete); the input pointer
        // stays valid for 'a, which the parser does not outlive.
        let failed = unsafe {
            let parser = sys.as_mut_ptr();
            if unsafe_libyaml_norway::yaml_parser_initialize(parser).fail {
                true
            } else {
                unsafe_libyaml_norway::yaml_parser_set_encoding(
                    parser,
                    unsafe_libyaml_norway::YAML_UTF8_ENCODING,
                );
                unsafe_libyaml_norway::yaml_parser_set_input_string(
                    parser,
                    text.as_ptr(),
                    text.len() as u64,
                );
                false
            }
        };
        Parser {
            sys,
            failed,
            _text: std::marker::PhantomData,
        }
    }

    /// The next event; None after a syntax error.
    fn next(&mut self) -> Option<Event> {
        if self.failed {
            return None;
        }
        let mut raw = MaybeUninit::<unsafe_libyaml_norway::yaml_event_t>::uninit();
        // SAFETY: the parser was initialised; `parse` fills the event on success,
        // and the event is copied out and deleted before anything else happens.
        unsafe {
            let event = raw.as_mut_ptr();
            if unsafe_libyaml_norway::yaml_parser_parse(self.sys.as_mut_ptr(), event).fail {
                self.failed = true;
                return None;
            }
            let copied = copy(&*event);
            unsafe_libyaml_norway::yaml_event_delete(event);
            Some(copied)
        }
    }
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        // SAFETY: initialised in `new` (zeroed even when that failed), deleted once.
        unsafe { unsafe_libyaml_norway::yaml_parser_delete(self.sys.as_mut_ptr()) }
    }
}

/// Copies what we need out of `event`.
///
/// SAFETY: `event` was filled by `yaml_parser_parse` and not yet deleted, so the
/// union member of its type is the one set and its strings are NUL-terminated.
unsafe fn copy(event: &unsafe_libyaml_norway::yaml_event_t) -> Event {
    let string = |ptr: *const u8| {
        // SAFETY: libyaml's anchors and tags are NUL-terminated or null.
        (!ptr.is_null()).then(|| unsafe { CStr::from_ptr(ptr.cast()) }.to_bytes().to_vec())
    };
    // SAFETY (each union read): the member read is the one for the event's type.
    let (kind, anchor, tag) = match event.type_ {
        unsafe_libyaml_norway::YAML_SEQUENCE_START_EVENT => unsafe {
            let data = event.data.sequence_start;
            (Kind::Start, string(data.anchor), string(data.tag))
        },
        unsafe_libyaml_norway::YAML_MAPPING_START_EVENT => unsafe {
            let data = event.data.mapping_start;
            (Kind::Start, string(data.anchor), string(data.tag))
        },
        unsafe_libyaml_norway::YAML_SEQUENCE_END_EVENT
        | unsafe_libyaml_norway::YAML_MAPPING_END_EVENT => (Kind::Close, None, None),
        unsafe_libyaml_norway::YAML_SCALAR_EVENT => unsafe {
            let data = event.data.scalar;
            (Kind::Scalar, string(data.anchor), string(data.tag))
        },
        unsafe_libyaml_norway::YAML_ALIAS_EVENT => unsafe {
            (Kind::Alias, string(event.data.alias.anchor), None)
        },
        unsafe_libyaml_norway::YAML_STREAM_END_EVENT => (Kind::End, None, None),
        _ => (Kind::Other, None, None),
    };
    Event {
        kind,
        anchor,
        tag,
        line: event.start_mark.line as usize,
        column: event.start_mark.column as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str, rules: Rules) -> String {
        check(text, rules).unwrap_err().to_string()
    }

    #[test]
    fn ordinary_documents_pass() {
        let texts = [
            "type: plan_task\nacceptance_criteria:\n  - {id: A, description: \"[x] {y}\"}\n",
            "a: |\n  [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\nb: '{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{'\n",
            "{\"task\": {\"instructions\": \"x\"}, \"runner\": {\"meta\": {}}}",
            "base: &b {model: m}\nmeta: *b\n",
            "",
            "not: [valid",
        ];
        for text in texts {
            assert_eq!(check(text, Rules::Reply), Ok(()), "{text}");
        }
        let nested = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(check(&nested, Rules::Reply), Ok(()));
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_refused_where_it_starts() {
        let deeper = MAX_DEPTH + 1;
        assert_eq!(
            refused(&"[".repeat(400_000), Rules::Document),
            "YAML nested deeper than 32 levels at line 1 column 33"
        );
        assert!(refused(&"{a: ".repeat(deeper), Rules::Document).contains("nested deeper"));
        let block: String = (0..deeper)
            .map(|n| format!("{}k:\n", " ".repeat(n)))
            .collect();
        assert_eq!(
            refused(&block, Rules::Document),
            "YAML nested deeper than 32 levels at line 33 column 33"
        );
        assert!(refused(&"- ".repeat(deeper), Rules::Reply).contains("nested deeper"));
    }

    #[test]
    fn tags_are_refused_in_replies_only() {
        for text in [
            "worker: !x {env: {A: b}}",
            "a: !!str 1",
            "a: !<tag:yaml.org,2002:map> {}",
            "- ! x",
            "? !k a\n: 1",
        ] {
            assert!(refused(text, Rules::Reply).contains("YAML tag"), "{text}");
            assert_eq!(check(text, Rules::Document), Ok(()), "{text}");
        }
        assert_eq!(
            refused("a:\n  b: !x {c: 1}", Rules::Reply),
            "YAML tag !x refused: write plain values at line 2 column 6"
        );
        // An exclamation mark inside a value is no tag.
        assert_eq!(check("a: yes! it is\nb: \"!x\"\n", Rules::Reply), Ok(()));
    }

    #[test]
    fn aliases_that_expand_too_far_are_refused() {
        let list = vec!["x"; 1000].join(", ");
        let uses = vec!["*a"; 200].join(", ");
        let bomb = format!("a: &a [{list}]\nb: [{uses}]\n");
        assert!(refused(&bomb, Rules::Document).contains("aliases expand to more than"));
        // Nested: each level multiplies.
        let mut laughs = String::from("l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n");
        for n in 1..9 {
            let prev = format!("*l{}", n - 1);
            laughs.push_str(&format!(
                "l{n}: &l{n} [{}]\n",
                [prev.as_str(); 10].join(", ")
            ));
        }
        assert!(refused(&laughs, Rules::Document).contains("aliases expand"));
        let few = format!("a: &a [{list}]\nb: [*a, *a, *a]\n");
        assert_eq!(check(&few, Rules::Document), Ok(()));
    }

    #[test]
    fn a_parse_is_checked_first() {
        assert!(
            parse("a: [[[[", Rules::Reply)
                .unwrap_err()
                .to_string()
                .contains("did not find")
        );
        assert!(
            parse(&"[".repeat(100), Rules::Reply)
                .unwrap_err()
                .to_string()
                .contains("nested deeper")
        );
        assert_eq!(parse("a: 1", Rules::Reply).unwrap()["a"], 1);
    }
}
